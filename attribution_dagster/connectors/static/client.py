"""Static context connector: a job case's `context.json` (spec section 1).

Errors are one readable line naming the file and the field, because the people reading
them are running the CLI against a directory someone else prepared.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from attribution_dagster.connectors.base import (
    BackendConfig,
    JobNotFound,
    JobQuery,
    SchedulerError,
    utc_now,
)
from attribution_dagster.core.context import ExecutionContext

CONTEXT_FILE = "context.json"
# The fields the case format (spec section 1) defines. Any other field is the writer's own:
# kept and ignored when its value does not fit what this tool would read from it (another
# tool's `"pods": {...}` object is not our list of pod placements), never a reason to reject.
SPEC_FIELDS = frozenset(
    {
        "job_id",
        "scheduler",
        "cluster",
        "state",
        "exit_code",
        "start",
        "end",
        "nodes",
        "gpu_model",
        "log_timezone",
        "node_addresses",
    }
)


class ContextError(Exception):
    """A case's execution context is missing or malformed; the message says where."""


def _field_name(loc: tuple[object, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _describe(err: dict) -> str:  # type: ignore[type-arg]
    field = _field_name(tuple(err.get("loc", ())))
    kind = err.get("type", "")
    if kind == "missing":
        return f"field '{field}' is missing"
    value = err.get("input")
    shown = json.dumps(value)[:60] if not isinstance(value, (dict, list)) else type(value).__name__
    return f"field '{field}' is invalid ({err.get('msg', kind)}; got {shown})"


def validate_context(data: dict) -> ExecutionContext:  # type: ignore[type-arg]
    """An ExecutionContext from a parsed context object. A field outside the spec whose value
    this tool cannot use (wrong type) is ignored: validation is retried without it, and the
    value is dropped. Errors in spec fields raise ValidationError as before."""
    dropped: set[str] = set()
    while True:
        try:
            return ExecutionContext.model_validate(
                {k: v for k, v in data.items() if k not in dropped}
            )
        except ValidationError as exc:
            extra = {
                str(e["loc"][0])
                for e in exc.errors()
                if e.get("loc") and str(e["loc"][0]) not in SPEC_FIELDS
            }
            if not extra or extra <= dropped:
                raise
            dropped |= extra


FIRST_DATE = datetime(1970, 1, 1, tzinfo=timezone.utc)
LAST_DATE = datetime(9998, 12, 31, 23, 59, 59, tzinfo=timezone.utc)


def out_of_range(ctx: ExecutionContext) -> str | None:
    """The problem with a context time an analysis cannot represent, naming the field; None
    when both are fine. Valid datetimes near year 9999 (or before 1970, where Loki's
    nanosecond times and epoch arithmetic turn negative) leave no room for the analysis
    window around them: `end` in year 9999 overflowed `end + lag` (issue 21)."""
    for name in ("start", "end"):
        t = getattr(ctx, name)
        if not FIRST_DATE <= t <= LAST_DATE:
            return (
                f"field '{name}' is invalid ({t.isoformat()} is outside the dates an "
                f"analysis can represent, {FIRST_DATE.year} to {LAST_DATE.year})"
            )
    return None


class StaticContextClient:
    """Reads and validates `<case>/context.json`; lists the cases under a directory."""

    def load(self, case_dir: Path) -> ExecutionContext:
        case_dir = Path(case_dir)
        if not case_dir.exists():
            raise ContextError(f"case path does not exist: {case_dir}")
        path = case_dir / CONTEXT_FILE if case_dir.is_dir() else case_dir
        try:
            text = path.read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise ContextError(f"{path}: no such file") from None
        except UnicodeDecodeError as exc:
            raise ContextError(f"{path}: not UTF-8 text ({exc.reason})") from None
        except OSError as exc:
            raise ContextError(f"{path}: unreadable ({exc.strerror or exc})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ContextError(
                f"{path}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
            ) from None
        except RecursionError:  # json's C decoder recurses once per nesting level
            raise ContextError(f"{path}: not valid JSON (nested too deeply to parse)") from None
        if not isinstance(data, dict):
            raise ContextError(f"{path}: expected a JSON object, got {type(data).__name__}")
        try:
            ctx = validate_context(data)
        except ValidationError as exc:
            errors = exc.errors()
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ContextError(f"{path}: {_describe(errors[0])}{more}") from None
        if not _zone_known(ctx.log_timezone):
            raise ContextError(
                f"{path}: field 'log_timezone' is invalid (unknown IANA zone {ctx.log_timezone!r})"
            )
        if (problem := out_of_range(ctx)) is not None:
            raise ContextError(f"{path}: {problem}")
        if ctx.end < ctx.start:
            raise ContextError(f"{path}: field 'end' is invalid (before 'start')")
        if any(not n.strip() or "/" in n for n in ctx.nodes):
            raise ContextError(f"{path}: field 'nodes' is invalid (empty or path-like node name)")
        return ctx

    def list_cases(self, root: Path) -> list[Path]:
        """Directories under `root` (itself included) that hold a context.json, sorted."""
        root = Path(root)
        if not root.is_dir():
            raise ContextError(f"case path does not exist: {root}")
        return sorted(p.parent for p in root.rglob(CONTEXT_FILE) if p.is_file())


def _zone_known(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


class StaticSchedulerConfig(BackendConfig):
    """Finished jobs from files: a directory of cases, or a JSON-lines file of contexts
    (one `context.json` object per line, as `attribution discover` prints them)."""

    kind: Literal["static"] = "static"
    path: str = Field(description="case directory tree, or a .jsonl file of contexts")

    def client(self, cluster: str) -> StaticSchedulerClient:
        return StaticSchedulerClient(Path(self.path).expanduser(), cluster)


class StaticSchedulerClient:
    """A scheduler answer written down: lists the contexts whose end is in the window."""

    def __init__(self, path: Path, cluster: str) -> None:
        self.path = path
        self.cluster = cluster

    def _contexts(self) -> Iterator[tuple[str, ExecutionContext]]:
        if self.path.is_file():
            try:
                fh = self.path.open(encoding="utf-8")
            except OSError as exc:
                raise SchedulerError(f"{self.path}: unreadable ({exc.strerror or exc})") from None
            with fh:
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        data = json.loads(line)
                        data.setdefault("cluster", self.cluster)
                        if out_of_range(ctx := validate_context(data)) is None:
                            yield f"{self.path}:{n}", ctx
                    except (ValueError, ValidationError, RecursionError, AttributeError):
                        continue  # a damaged line is one job lost, not the listing
            return
        if not self.path.is_dir():
            raise SchedulerError(f"static scheduler path does not exist: {self.path}")
        client = StaticContextClient()
        for case in client.list_cases(self.path):
            try:
                ctx = client.load(case)
            except ContextError:
                continue
            update: dict[str, object] = {"case_dir": str(case)}
            if ctx.cluster is None:
                update["cluster"] = self.cluster
            yield str(case), ctx.model_copy(update=update)

    def finished_jobs(self, query: JobQuery) -> list[ExecutionContext]:
        until = query.until or utc_now()
        states = set(query.states)
        found = [
            ctx
            for _, ctx in self._contexts()
            if query.since <= ctx.end < until and (not states or ctx.state in states)
        ]
        found.sort(key=lambda c: (c.end, c.job_id))
        return found[: query.limit] if query.limit else found

    def get_job(self, job_id: str) -> ExecutionContext:
        for _, ctx in self._contexts():
            if ctx.job_id == job_id:
                return ctx
        raise JobNotFound(f"job {job_id} not found under {self.path}")

"""Static context connector: a job case's `context.json` (spec section 1).

Errors are one readable line naming the file and the field, because the people reading
them are running the CLI against a directory someone else prepared.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from attribution_dagster.models import ExecutionContext

CONTEXT_FILE = "context.json"


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
        if not isinstance(data, dict):
            raise ContextError(f"{path}: expected a JSON object, got {type(data).__name__}")
        try:
            ctx = ExecutionContext.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise ContextError(f"{path}: {_describe(errors[0])}{more}") from None
        if not _zone_known(ctx.log_timezone):
            raise ContextError(
                f"{path}: field 'log_timezone' is invalid (unknown IANA zone {ctx.log_timezone!r})"
            )
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

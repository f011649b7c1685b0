"""Node log trees on shared storage (`{kind: files, root: ..., paths: [...]}`, FilesSource).

Paths are templates over the job (`{node}`, `{job_id}`, `{cluster}`, `{stdout}`,
`{stderr}`); `cluster_paths` are cluster-level sources read for the same window (records
on `CLUSTER_NODE`, only lines naming a job node kept). Rotated files (docs/files.md): a
file whose modification time is before the window cannot hold a line of it and is not
opened; a file whose first line is timed after the window is not read past that line.
Reading and confinement: connectors/files/reader.py.
"""

from __future__ import annotations

import copy
import gzip
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from attribution_dagster.connectors.base import BackendConfig, OwnLineCap, SourceError, SourceLimits
from attribution_dagster.connectors.files.reader import (
    HEAD_BYTES,
    Confined,
    FileJob,
    Reader,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    LineGrouper,
    LogBatch,
    SourceCoverage,
)
from attribution_dagster.core.formats.timestamps import TimestampParser
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.settings import Window

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_KNOWN = {"node", "job_id", "cluster", "stdout", "stderr"}
_WHOLE = {"{stdout}", "{stderr}"}


def _check_template(t: str, cluster_level: bool) -> str:
    names = _PLACEHOLDER.findall(t)
    unknown = sorted(set(names) - _KNOWN)
    if unknown:
        raise ValueError(f"{t!r}: unknown placeholder {{{unknown[0]}}} (known: {sorted(_KNOWN)})")
    if any(n in ("stdout", "stderr") for n in names) and t.strip() not in _WHOLE:
        raise ValueError(f"{t!r}: {{stdout}} / {{stderr}} stand alone (the scheduler's path)")
    if t.strip() in _WHOLE:
        if cluster_level:
            raise ValueError(f"{t!r}: the job's stdout is not a cluster-level file")
        return t.strip()
    if t.startswith("/") or ".." in Path(t).parts:
        raise ValueError(f"{t!r}: templates are relative to root and stay inside it")
    if names.count("node") > 1:
        raise ValueError(f"{t!r}: at most one {{node}}")
    if cluster_level and "node" in names:
        raise ValueError(f"{t!r}: a cluster-level path names no node; put it in 'paths'")
    if not cluster_level and not {"node", "job_id"} & set(names):
        raise ValueError(
            f"{t!r}: a node path needs {{node}}, {{job_id}}, {{stdout}} or {{stderr}}; "
            "files about the whole cluster go in 'cluster_paths'"
        )
    return t


class FilesSourceConfig(BackendConfig):
    """Node log trees on shared storage (`/shared/logs/<node>/syslog*`, job output files).

    Templates are relative to `root`; `{node}` is a job node in any spelling the directory
    uses (FQDN or short, any case: nodes.NodeIndex), `{job_id}` and `{cluster}` are
    substituted, shell globs (`*`, `?`, `[..]`) match within one path component, a matched
    directory is read whole. `{stdout}` / `{stderr}` are the scheduler's paths of the job's
    output (read only inside root). Nothing outside root is ever read.
    """

    kind: Literal["files"] = "files"
    root: str = Field(description="directory holding the logs; reading never leaves it")
    paths: list[str] = Field(
        default_factory=lambda: ["{node}/syslog*", "{node}/kern.log*", "{stdout}", "{stderr}"],
        description="per-node / per-job files: {node}, {job_id}, {cluster}, {stdout}, {stderr}",
    )
    cluster_paths: list[str] = Field(
        default_factory=list,
        description="cluster-level files (slurmctld.log*, event listings): lines naming a job "
        "node are evidence about that node",
    )
    skip_by_time: bool = Field(
        default=True,
        description="do not read files whose time span (first line .. mtime) misses the window",
    )
    slack_seconds: float = Field(
        default=600.0, ge=0, description="clock difference tolerated between mtime and lines"
    )
    max_line_bytes: int = Field(default=65536, ge=256)
    workers: int | None = Field(
        default=None, ge=1, description="scanner processes for a job over 32 MiB; None = all cores"
    )

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        return [_check_template(t, cluster_level=False) for t in v]

    @field_validator("cluster_paths")
    @classmethod
    def _cluster_paths(cls, v: list[str]) -> list[str]:
        return [_check_template(t, cluster_level=True) for t in v]

    def client(self, cluster: str) -> FilesSource:
        return FilesSource(self, cluster=cluster)


def _scheduler_path(raw: str, ctx: ExecutionContext) -> str:
    """Slurm's filename patterns a scheduler may leave unexpanded (`%j`, `%x`, `%u`, `%N`)."""
    if "%" not in raw:
        return raw
    subs = {
        "j": ctx.job_id,
        "A": ctx.job_id.split("_", 1)[0],
        "x": ctx.job_name or "",
        "u": ctx.user or "",
        "N": ctx.nodes[0],
        "%": "%",
    }
    return re.sub(r"%([jAxuN%])", lambda m: subs[m.group(1)], raw)


class FilesSource(OwnLineCap, Reader):
    """LogSource over a node log tree on shared storage (see FilesSourceConfig)."""

    def __init__(self, config: FilesSourceConfig, cluster: str | None = None) -> None:
        super().__init__(max_line_bytes=config.max_line_bytes, workers=config.workers)
        self.config = config
        self.cluster = cluster
        self.name = config.source_name
        self.root = Path(config.root).expanduser()

    @property
    def own_max_line_bytes(self) -> int:
        return self.max_line_bytes

    def _with_cap(self, limit: int) -> FilesSource:
        other = copy.copy(self)
        other.max_line_bytes = limit
        return other

    # -- LogSource ------------------------------------------------------------------------
    def fetch_logs(
        self,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        limits: SourceLimits | None = None,
        grouper: LineGrouper | None = None,
    ) -> LogBatch:
        source = self.capped(limits)
        if source is not self:  # the analysis cap is below this source's own
            return source.fetch_logs(ctx, anchors, window, grouper=grouper)
        if not self.root.is_dir():
            raise SourceError(f"files root {self.root} is not a readable directory")
        cov = SourceCoverage(source=self.name)
        box = Confined(self.root, f"the root {self.root}")
        index = NodeIndex.of(ctx)
        listing: dict[str, list[str] | None] = {}
        jobs: list[FileJob] = []
        seen: set[str] = set()
        node_files: set[str] = set()
        parser = TimestampParser(ctx.start, ctx.log_timezone)

        def add(node: str, path: Path, display: str) -> None:
            for real, shown in box.walk(path, display, cov.errors):
                key = str(real)
                if key in seen:  # two templates matching one file: read once
                    continue
                seen.add(key)
                if self.config.skip_by_time and not self._may_overlap(real, window, parser):
                    cov.files_skipped += 1
                    continue
                jobs.append(FileJob(node, real, shown))
                if node != CLUSTER_NODE:
                    node_files.add(node)

        batch_host = index.nodes[0]
        for template in self.config.paths:
            if template in _WHOLE:
                self._add_output(template, ctx, box, cov, add, batch_host)
                continue
            for path, node in self._expand(template, ctx, index, listing, box, cov.errors):
                add(node or batch_host, path, str(path))
        for template in self.config.cluster_paths:
            for path, _ in self._expand(template, ctx, index, listing, box, cov.errors):
                add(CLUSTER_NODE, path, str(path))
        # the nodes this source is meant to cover: all with a {node} template, else the batch
        # host with a job template ({stdout}, {job_id}), none with cluster files only
        paths = self.config.paths
        if any("{node}" in t for t in paths):
            expected = index.nodes
        else:
            expected = [batch_host] if paths else []
        cov.nodes_read = [n for n in index.nodes if n in node_files]
        cov.nodes_missing = [n for n in expected if n not in cov.nodes_read]
        return self._read_all(jobs, ctx, anchors, window, cov, str(self.root), grouper)

    # -- templates --------------------------------------------------------------------------
    def _add_output(
        self,
        template: str,
        ctx: ExecutionContext,
        box: Confined,
        cov: SourceCoverage,
        add: Callable[[str, Path, str], None],
        batch_host: str,
    ) -> None:
        """The job's stdout / stderr file (the scheduler's path), when it lies inside root."""
        raw = ctx.stdout_path if template == "{stdout}" else ctx.stderr_path
        if not raw:
            return
        path = Path(_scheduler_path(raw, ctx)).expanduser()
        if not path.is_absolute():
            path = self.root / path
        if not box.inside(os.path.realpath(path)):
            cov.errors.append(f"{template} {path}: outside the root {self.root}, not read")
            return
        if not os.path.lexists(path):
            cov.errors.append(f"{template} {path}: not found")
            return
        add(batch_host, path, str(path))

    def _expand(
        self,
        template: str,
        ctx: ExecutionContext,
        index: NodeIndex,
        listing: dict[str, list[str] | None],
        box: Confined,
        notes: list[str],
    ) -> Iterable[tuple[Path, str | None]]:
        """(path, job node or None) for every existing path the template matches."""
        values = {"job_id": ctx.job_id, "cluster": ctx.cluster or self.cluster or ""}
        current: list[tuple[Path, str | None]] = [(self.root, None)]
        for segment in [s for s in template.split("/") if s and s != "."]:
            nxt: list[tuple[Path, str | None]] = []
            has_node = "{node}" in segment
            seg = _PLACEHOLDER.sub(
                lambda m: m.group(0) if m.group(1) == "node" else _glob_escape(values[m.group(1)]),
                segment,
            )
            if not has_node and not _has_magic(seg):
                name = _unescape(seg)
                nxt = [
                    (p / name, n)
                    for p, n in current
                    if self._enterable(p, listing, box, notes) and os.path.lexists(p / name)
                ]
            else:
                rx = _segment_regex(seg)
                for parent, node in current:
                    for name in self._list(parent, listing, box, notes):
                        m = rx.fullmatch(name)
                        if m is None:
                            continue
                        hit = node
                        if has_node:
                            hit = index.resolve(m.group("node"))
                            if hit is None:
                                continue  # another node's directory: never read
                        nxt.append((parent / name, hit))
            current = nxt
            if not current:
                break
        return current

    @staticmethod
    def _enterable(
        parent: Path, listing: dict[str, list[str] | None], box: Confined, notes: list[str]
    ) -> bool:
        """May the template walk into this directory? Not when it resolves outside the root
        (noted once per fetch)."""
        key = "enter:" + str(parent)
        if key not in listing:
            listing[key] = [] if box.resolve(parent, str(parent), notes) is not None else None
        return listing[key] is not None

    @classmethod
    def _list(
        cls, parent: Path, listing: dict[str, list[str] | None], box: Confined, notes: list[str]
    ) -> list[str]:
        """Entries of a directory the template walks through; a directory that resolves
        outside the root is not even listed."""
        key = str(parent)
        if key not in listing:
            listing[key] = []
            if cls._enterable(parent, listing, box, notes) and os.path.isdir(parent):
                try:
                    listing[key] = sorted(os.listdir(parent))
                except OSError:
                    pass
        return listing[key] or []

    # -- rotation ---------------------------------------------------------------------------
    def _may_overlap(self, path: Path, window: Window, parser: TimestampParser) -> bool:
        """False when the file's span [first line's time, mtime] cannot meet the window.
        The mtime test needs no open; the first line is read only when mtime allows."""
        slack = timedelta(seconds=self.config.slack_seconds)
        try:
            st = path.stat()
        except OSError:
            return True  # let the scanner report it
        if not stat.S_ISREG(st.st_mode):
            return True  # a FIFO or device is never opened; the scanner reports it
        mtime = datetime.fromtimestamp(st.st_mtime, tz=timezone.utc)
        if mtime < window.start - slack:
            return False
        first = first_line_time(path, parser)
        return first is None or first <= window.end + slack


def first_line_time(path: Path, parser: TimestampParser) -> datetime | None:
    """Time of a file's first line (gzip: from its first decompressed bytes), or None when
    the first line carries none or the head cannot be read."""
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
        else:
            with open(path, "rb") as fh:
                head = fh.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return None
    line = head.split(b"\n", 1)[0]
    return parser.parse_line(line) if line else None


_MAGIC = re.compile(r"(?<!\\)[*?\[]")


def _has_magic(s: str) -> bool:
    return _MAGIC.search(s) is not None


def _glob_escape(s: str) -> str:
    return re.sub(r"([*?\[\]\\])", r"\\\1", s)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", r"\1", s)


def _segment_regex(seg: str) -> re.Pattern[str]:
    """One path component's glob (`*`, `?`, `[..]`, `\\x` literal; `{node}` a named group)
    as a regex matched against whole directory entry names."""
    out: list[str] = []
    i, n = 0, len(seg)
    while i < n:
        if seg.startswith("{node}", i):
            out.append(r"(?P<node>.+?)")
            i += 6
            continue
        ch = seg[i]
        if ch == "\\" and i + 1 < n:
            out.append(re.escape(seg[i + 1]))
            i += 2
        elif ch == "*":
            out.append(".*")
            i += 1
        elif ch == "?":
            out.append(".")
            i += 1
        elif ch == "[" and "]" in seg[i + 2 :]:
            j = seg.index("]", i + 2)
            body = seg[i + 1 : j]
            neg = body.startswith("!")
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = j + 1
        else:
            out.append(re.escape(ch))
            i += 1
    return re.compile("".join(out), re.S)

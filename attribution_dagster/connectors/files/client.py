"""Local files: a case's `logs/<node>/...` and `metrics/*.prom` (spec section 1), and node log
trees on shared storage (`{kind: files, root: ..., paths: [...]}`, FilesSource).

Reads only the job's nodes and window. Log files are prefiltered by the streaming scanner
(connectors/scan.py); when a case is large, files are scanned in parallel by a fork-based
process pool (files are independent), small cases stay in-process so they return in
milliseconds. Problems (missing nodes, unreadable or corrupt files, bad lines) end up in
SourceCoverage, never in a traceback.

Confinement: reading never leaves the case directory (or the configured root). Every file
is opened by its resolved path, and a symlink at any depth that resolves outside is not
followed; coverage names it (`logs/node-a/syslog: symlink to outside the case, not read`).

Cluster-level sources (a `logs/<dir>` of a case whose name is no job node, a FilesSource's
`cluster_paths`) are read for the same window; their records carry the node
`nodes.CLUSTER_NODE` and only lines naming a job node are kept (the parser catalog moves each
observation to the node the line names); the others are counted as `context_lines`.

Rotated files (FilesSource only, docs/files.md): a file whose modification time is before
the window cannot hold a line of it and is not opened; a file whose first line is timed after
the window is not read past that line. Case directories are read whole: their mtimes are
those of whoever copied them.
"""

from __future__ import annotations

import copy
import gzip
import math
import multiprocessing
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from attribution_dagster.connectors.base import BackendConfig, SourceError, SourceLimits
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    LogBatch,
    MetricSample,
    RawRecord,
    SourceCoverage,
)
from attribution_dagster.core.formats.promtext import PromFile, iter_samples, sample_nodes
from attribution_dagster.core.formats.scan import DEFAULT_BLOCK, FileScan, FileScanner, ScanSpec
from attribution_dagster.core.formats.timestamps import TimestampParser
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.settings import Window

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
HEAD_BYTES = 64 * 1024  # how much of a file's head is read to find its first line's time

_worker: FileScanner | None = None  # per worker process, built by _init_worker


def _init_worker(spec: ScanSpec) -> None:
    global _worker
    _worker = FileScanner(spec)


def _scan_in_worker(path: str, display: str) -> FileScan:
    assert _worker is not None
    return _worker.scan_path(Path(path), display)


def _usable_cpus() -> int:
    """CPUs this process may run on (a container's affinity, not the host's core count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def match_nodes(available: Sequence[str], nodes: Sequence[str]) -> dict[str, str]:
    """Map job node -> directory/label name through nodes.NodeIndex: exact match first, else
    the same host key (`node-a` vs `NODE-A.cluster.local`), so spellings still line up."""
    index = NodeIndex(sorted(available))
    out: dict[str, str] = {}
    for node in nodes:
        hit = index.resolve(node)
        if hit is not None:
            out[node] = hit
    return out


def _status(read: int, missing: int, errors: int, total_files: int, failed_files: int) -> str:
    if total_files and failed_files == total_files:
        return "failed"
    if read == 0:
        return "empty"
    return "partial" if missing or errors else "ok"


# --- confinement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FileJob:
    """One file to scan: the job node (or CLUSTER_NODE) its lines belong to, the resolved
    path opened, and the locator prefix a person reopens."""

    node: str
    path: Path
    display: str


class Confined:
    """Paths under one root: resolves every path and refuses those that end up outside."""

    def __init__(self, root: Path, what: str) -> None:
        self.root = os.path.realpath(root)
        self.what = what  # "the case", "the root /shared/logs"

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root.rstrip(os.sep) + os.sep)

    def resolve(self, path: Path, display: str, notes: list[str]) -> str | None:
        """The real path, or None (noted) when it resolves outside the root."""
        real = os.path.realpath(path)
        if self.inside(real):
            return real
        kind = "symlink" if os.path.islink(path) else "path through a symlink"
        notes.append(f"{display}: {kind} to outside {self.what}, not read")
        return None

    def walk(self, path: Path, display: str, notes: list[str]) -> list[tuple[Path, str]]:
        """Files under `path` (itself a file or a directory), resolved and confined; sorted,
        symlinked directories inside the root followed once, dangling links and FIFOs listed
        (the scanner reports them)."""
        out: list[tuple[Path, str]] = []
        self._walk(path, display, notes, out, set())
        return out

    def _walk(self, path: Path, display: str, notes: list[str], out: list, seen: set[str]) -> None:
        real = self.resolve(path, display, notes)
        if real is None or real in seen:  # a file or directory reached twice is read once
            return
        seen.add(real)
        if not os.path.isdir(real):
            out.append((Path(real), display))
            return
        try:
            names = sorted(os.listdir(real))
        except OSError as exc:
            notes.append(f"{display}: unreadable directory ({exc.strerror or exc})")
            return
        for name in names:
            self._walk(path / name, f"{display}/{name}", notes, out, seen)


# --- reading ---------------------------------------------------------------------------------


class _Reader:
    """Scans a list of FileJobs into RawRecords and fills the coverage counters."""

    def __init__(
        self,
        *,
        max_line_bytes: int = 65536,
        workers: int | None = None,
        block_size: int = DEFAULT_BLOCK,
        use_hyperscan: bool = True,
        parallel_min_bytes: int = PARALLEL_MIN_BYTES,
    ) -> None:
        self.max_line_bytes = max_line_bytes
        self.workers = max(1, workers) if workers is not None else _usable_cpus()
        self.block_size = block_size
        self.use_hyperscan = use_hyperscan
        self.parallel_min_bytes = parallel_min_bytes

    def _spec(self, ctx: ExecutionContext, anchors: Sequence[Anchor], window: Window) -> ScanSpec:
        hits = [a for a in anchors if not a.last_only]
        return ScanSpec(
            literals=tuple(a.literal for a in hits),
            context_after=tuple(a.context_after for a in hits),
            last_literals=tuple(a.literal for a in anchors if a.last_only),
            window_start=window.start,
            window_end=window.end,
            reference=ctx.start,
            log_timezone=ctx.log_timezone,
            max_line_bytes=self.max_line_bytes,
            block_size=self.block_size,
            use_hyperscan=self.use_hyperscan,
            fold_repeats=True,
        )

    def _read_all(
        self,
        jobs: list[FileJob],
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        cov: SourceCoverage,
        root: str,
    ) -> LogBatch:
        """Scan the listed files into records and settle the coverage status. `root`: the
        case or root directory the files were found under (part of each FileLine locator)."""
        batch, failed = self._read(jobs, ctx, anchors, window, cov, root)
        cov.errors = list(dict.fromkeys(cov.errors))  # a path two templates reached: once
        read_any = len(cov.nodes_read) + (1 if any(j.node == CLUSTER_NODE for j in jobs) else 0)
        cov.status = _status(  # type: ignore[assignment]
            read_any, len(cov.nodes_missing), len(cov.errors), len(jobs), failed
        )
        return batch

    def _read(
        self,
        jobs: list[FileJob],
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        cov: SourceCoverage,
        root: str,
    ) -> tuple[LogBatch, int]:
        """Records of every job (cluster-level lines naming no job node dropped and counted)
        and the number of files that could not be read at all."""
        results = self._scan_all(self._spec(ctx, anchors, window), jobs)
        index = NodeIndex.of(ctx)
        records: list[RawRecord] = []
        tails: list[RawRecord] = []
        progress: list[RawRecord] = []
        failed = 0
        for job, res in zip(jobs, results, strict=True):
            cov.files += 1
            cov.bytes += res.bytes
            cov.lines += res.lines
            cov.out_of_window += res.out_of_window
            cov.invalid_utf8_lines += res.invalid_utf8_lines
            cov.overlong_lines += res.overlong_lines
            cov.binary_lines += res.binary_lines
            if res.error:
                cov.errors.append(res.error)
                failed += 1
            for lineno, t, quality, text in res.records:
                # the whole record: a pretty-printed Event names its node lines after the
                # `"eventTime"` line the record starts at (the API door sees it whole)
                if job.node == CLUSTER_NODE and not index.named_in(text):
                    cov.context_lines += 1
                    continue
                rep = res.repeats.get(lineno)
                # built without validation: every value is the scanner's own, typed already
                records.append(
                    RawRecord.model_construct(
                        source="files",
                        node=job.node,
                        locator=FileLine.model_construct(root=root, path=job.display, line=lineno),
                        time=t,
                        time_quality=quality,
                        time_latest=res.latest.get(lineno),
                        text=text,
                        stream=job.path.name,
                        count=rep[0] if rep else 1,
                        time_last=rep[2] if rep else None,
                        text_last=rep[3] if rep else None,
                        locator_last=FileLine.model_construct(
                            root=root, path=job.display, line=rep[1]
                        )
                        if rep
                        else None,
                    )
                )
            if job.node == CLUSTER_NODE:
                continue  # where a cluster-level file stops says nothing about a job node
            if res.progress is not None:  # where training stopped advancing (engine)
                lineno, t, quality, text = res.progress
                progress.append(
                    RawRecord(
                        source="files",
                        node=job.node,
                        locator=FileLine(root=root, path=job.display, line=lineno),
                        time=t,
                        time_quality=quality,  # type: ignore[arg-type]
                        text=text,
                        stream=job.path.name,
                    )
                )
            if res.tail is not None:  # where the file stops: silence of a node (engine)
                lineno, t, text = res.tail
                tails.append(
                    RawRecord(
                        source="files",
                        node=job.node,
                        locator=FileLine(root=root, path=job.display, line=lineno),
                        time=t,
                        text=text,
                        stream=job.path.name,
                        last_of_file=True,
                    )
                )
        cov.records = len(records)
        return LogBatch(records=records, tails=tails, progress=progress, coverage=cov), failed

    def _scan_all(self, spec: ScanSpec, jobs: list[FileJob]) -> list[FileScan]:
        sizes = []
        for job in jobs:
            try:
                sizes.append(job.path.stat().st_size)
            except OSError:
                sizes.append(0)
        workers = min(self.workers, len(jobs))
        if workers > 1 and sum(sizes) >= self.parallel_min_bytes:
            try:
                return self._scan_parallel(spec, jobs, sizes, workers)
            except (OSError, ValueError, RuntimeError):  # no fork here: fall back in-process
                pass
        scanner = FileScanner(spec)
        return [scanner.scan_path(job.path, job.display) for job in jobs]

    @staticmethod
    def _scan_parallel(
        spec: ScanSpec, jobs: list[FileJob], sizes: list[int], workers: int
    ) -> list[FileScan]:
        ctx = multiprocessing.get_context("fork")
        order = sorted(range(len(jobs)), key=lambda i: -sizes[i])  # big files first
        results: list[FileScan | None] = [None] * len(jobs)
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(spec,)
        ) as pool:
            futures = {
                i: pool.submit(_scan_in_worker, str(jobs[i].path), jobs[i].display) for i in order
            }
            for i, fut in futures.items():
                results[i] = fut.result()
        return [r if r is not None else FileScan() for r in results]


class LocalFilesClient(_Reader):
    """Reads log and metric files of a case directory."""

    # -- logs ---------------------------------------------------------------------------
    def fetch_logs(
        self,
        case_dir: Path,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
    ) -> LogBatch:
        """`logs/<node>/**` of the job's nodes (any spelling NodeIndex resolves), and every
        other `logs/<dir>/**` as a cluster-level source (spec section 1)."""
        case_dir = Path(case_dir)
        cov = SourceCoverage(source="files:logs")
        box = Confined(case_dir, "the case")
        index = NodeIndex.of(ctx)
        logs = case_dir / "logs"
        dirs: list[str] = []
        if os.path.lexists(logs) and box.resolve(logs, "logs", cov.errors) is not None:
            if logs.is_dir():
                dirs = sorted(p.name for p in logs.iterdir() if p.is_dir())
        by_node: dict[str, list[str]] = {}
        cluster_dirs: list[str] = []
        for name in dirs:
            node = index.resolve(name)
            if node is None:
                cluster_dirs.append(name)
            else:
                by_node.setdefault(node, []).append(name)
        jobs: list[FileJob] = []
        for node in index.nodes:
            found = [
                FileJob(node, path, display)
                for name in by_node.get(node, [])
                for path, display in box.walk(logs / name, f"logs/{name}", cov.errors)
            ]
            if found:
                cov.nodes_read.append(node)
                jobs.extend(found)
        cov.nodes_missing = [n for n in ctx.nodes if n not in cov.nodes_read]
        for name in cluster_dirs:
            jobs.extend(
                FileJob(CLUSTER_NODE, path, display)
                for path, display in box.walk(logs / name, f"logs/{name}", cov.errors)
            )
        return self._read_all(jobs, ctx, anchors, window, cov, str(case_dir))

    # -- metrics ------------------------------------------------------------------------
    def fetch_metrics(
        self, case_dir: Path, ctx: ExecutionContext, window: Window
    ) -> tuple[list[MetricSample], SourceCoverage | None]:
        case_dir = Path(case_dir)
        mdir = case_dir / "metrics"
        if not os.path.lexists(mdir):
            return [], None
        cov = SourceCoverage(source="files:metrics")
        box = Confined(case_dir, "the case")
        paths = [
            (path, display)
            for path, display in box.walk(mdir, "metrics", cov.errors)
            if path.name.endswith((".prom", ".prom.gz"))
        ]
        index = NodeIndex.of(ctx)
        samples: list[MetricSample] = []
        seen_nodes: set[str] = set()
        label_nodes: dict[str, str | None] = {}
        failed = 0
        for path, display in paths:
            cov.files += 1
            parsed = PromFile()
            no_ts = 0
            try:
                cov.bytes += path.stat().st_size
                opener = gzip.open if path.name.endswith(".gz") else open
                with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                    for s in iter_samples(fh, parsed):
                        cov.samples += 1
                        if s.timestamp_ms is None:
                            no_ts += 1
                            continue
                        node = None
                        for raw_node in sample_nodes(s.labels):
                            if raw_node not in label_nodes:
                                label_nodes[raw_node] = index.resolve(raw_node)
                            node = label_nodes[raw_node]
                            if node is not None:
                                break
                        if node is None or not math.isfinite(s.value):
                            continue
                        seen_nodes.add(node)
                        try:
                            t = datetime.fromtimestamp(s.timestamp_ms / 1000, tz=timezone.utc)
                        except (OverflowError, OSError, ValueError):
                            parsed.malformed.append(s.line)
                            continue
                        if not window.contains(t):
                            cov.out_of_window += 1
                            continue
                        samples.append(
                            MetricSample(
                                source="files",
                                node=node,
                                locator=FileLine(root=str(case_dir), path=display, line=s.line),
                                time=t,
                                name=s.name,
                                labels=s.labels,
                                value=s.value,
                            )
                        )
            except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
                cov.errors.append(f"{display}: corrupt gzip ({exc or type(exc).__name__})")
                failed += 1
            except OSError as exc:
                cov.errors.append(f"{display}: unreadable ({exc.strerror or exc})")
                failed += 1
            cov.lines += parsed.lines
            if parsed.malformed:
                cov.errors.append(
                    f"{display}: {len(parsed.malformed)} malformed line(s) skipped "
                    f"(first at line {parsed.malformed[0]})"
                )
            if no_ts:
                cov.errors.append(
                    f"{display}: {no_ts} sample(s) without a timestamp skipped "
                    "(cannot be placed in time)"
                )
        cov.records = len(samples)
        cov.nodes_read = [n for n in ctx.nodes if n in seen_nodes]
        cov.nodes_missing = [n for n in ctx.nodes if n not in seen_nodes]
        cov.status = _status(  # type: ignore[assignment]
            len(cov.nodes_read), len(cov.nodes_missing), len(cov.errors), len(paths), failed
        )
        return samples, cov


# --- node log trees on shared storage ----------------------------------------------------------

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
    workers: int | None = Field(default=1, ge=1, description="scanner processes")

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


class FilesSource(_Reader):
    """LogSource over a node log tree on shared storage (see FilesSourceConfig)."""

    def __init__(self, config: FilesSourceConfig, cluster: str | None = None) -> None:
        super().__init__(max_line_bytes=config.max_line_bytes, workers=config.workers)
        self.config = config
        self.cluster = cluster
        self.name = config.source_name
        self.root = Path(config.root).expanduser()

    def with_max_line_bytes(self, limit: int) -> FilesSource:
        """This source cutting lines at `limit` when that is below its own `max_line_bytes`
        (the analysis setting can lower a source's cap, not raise it)."""
        if limit >= self.max_line_bytes:
            return self
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
    ) -> LogBatch:
        if limits is not None and limits.max_line_bytes is not None:
            capped = self.with_max_line_bytes(limits.max_line_bytes)
            if capped is not self:
                return capped.fetch_logs(ctx, anchors, window)
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
        return self._read_all(jobs, ctx, anchors, window, cov, str(self.root))

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

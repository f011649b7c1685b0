"""Reading local log files for the files connectors (connectors/files/case.py: a case's
`logs/`, connectors/files/tree.py: node log trees on shared storage): the streaming
scanner's spec, in-process or fork-pool scanning (files are independent; small cases stay
in-process so they return in milliseconds), the records, tails and progress of a scan, and
confinement.

Confinement: reading never leaves the case directory (or the configured root). Every file
is opened by its resolved path, and a symlink at any depth that resolves outside is not
followed; coverage names it (`logs/node-a/syslog: symlink to outside the case, not read`).
"""

from __future__ import annotations

import dataclasses
import gc
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from attribution_dagster.connectors.files import grouping
from attribution_dagster.core.construct import constructor
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    LineGrouper,
    LogBatch,
    RawRecord,
    SourceCoverage,
)
from attribution_dagster.core.formats.newlines import FAST_COUNT_MIN_BYTES, numpy_importable
from attribution_dagster.core.formats.scan import DEFAULT_BLOCK, FileScan, FileScanner, ScanSpec
from attribution_dagster.core.gcpause import gc_paused
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.settings import Window

PARALLEL_MIN_BYTES = 32 * 1024 * 1024
CHUNK_BYTES = 8 * 1024 * 1024  # a pool task's files: at most this many bytes ...
CHUNK_FILES = 64  # ... and this many files (see chunks)
HEAD_BYTES = 64 * 1024  # how much of a file's head is read to find its first line's time

_worker: FileScanner | None = None  # per worker process, built by _init_worker
_grouper: LineGrouper | None = None  # the pipeline's, inherited by the forked workers

# built without validation: every value is the scanner's own, typed already
_record = constructor(RawRecord)
_file_line = constructor(FileLine)


def _init_worker(spec: ScanSpec, grouper: LineGrouper | None) -> None:
    global _worker, _grouper
    gc.enable()  # forked while the parent holds cycle collection off (_read_all)
    _worker, _grouper = FileScanner(spec), grouper


def _scan_in_worker(files: list[tuple[str, str, str]]) -> list[tuple[FileScan, list[tuple]]]:
    """One task's files (path, display, node), scanned in turn."""
    assert _worker is not None
    return [scan_rows(_worker, _grouper, Path(p), display, node) for p, display, node in files]


def _job_args(job: FileJob) -> tuple[str, str, str]:
    return str(job.path), job.display, job.node


def chunks(order: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """The files (indexes, in `order`) cut into pool tasks of up to CHUNK_BYTES and
    CHUNK_FILES each: a task costs the pool ~0.2 ms to send and collect, as much as scanning
    a small file, so 2,048 small files as 2,048 tasks ran slower on two workers than on one
    (watchdog_8192); a big file is a task of its own."""
    out: list[list[int]] = []
    cur: list[int] = []
    held = 0
    for i in order:
        if cur and (held + sizes[i] > CHUNK_BYTES or len(cur) >= CHUNK_FILES):
            out.append(cur)
            cur, held = [], 0
        cur.append(i)
        held += sizes[i]
    if cur:
        out.append(cur)
    return out


def scan_rows(
    scanner: FileScanner, grouper: LineGrouper | None, path: Path, display: str, node: str
) -> tuple[FileScan, list[tuple]]:
    """One file's scan and its kept lines as rows (grouping.py), lines stating the same facts
    folded when a grouper is given; the scan's own records are freed (sent once)."""
    res = scanner.scan_path(path, display)
    if grouper is not None and node != CLUSTER_NODE and len(res.records) > grouping.GROUP_MIN_LINES:
        rows = grouping.grouped_rows(res, grouper.parts(node, path.name, res.records))
    else:
        rows = grouping.plain_rows(res)
    res.records, res.repeats = [], {}
    return res, rows


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


def coverage_status(
    read: int, missing: int, errors: int, total_files: int, failed_files: int
) -> str:
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

    def _walk(
        self,
        path: Path,
        display: str,
        notes: list[str],
        out: list,
        seen: set[str],
        real: str | None = None,
    ) -> None:
        """`real`: the path's real path when known (an entry of a real directory that is no
        symlink is its own real path: no `realpath`, whose lstat of every component cost
        ~10 system calls a file on a 2,048-file job)."""
        real = real if real is not None else self.resolve(path, display, notes)
        if real is None or real in seen:  # a file or directory reached twice is read once
            return
        seen.add(real)
        if not os.path.isdir(real):
            out.append((Path(real), display))
            return
        try:
            with os.scandir(real) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            notes.append(f"{display}: unreadable directory ({exc.strerror or exc})")
            return
        for entry in entries:
            try:
                plain = not entry.is_symlink()
            except OSError:
                plain = False
            known = os.path.join(real, entry.name) if plain else None
            self._walk(path / entry.name, f"{display}/{entry.name}", notes, out, seen, known)


# --- reading ---------------------------------------------------------------------------------


class Reader:
    """Scans a list of FileJobs into RawRecords and fills the coverage counters."""

    # fetch_logs takes `grouper` (core.evidence.LineGrouper): lines that state the same facts
    # are folded in the scanner workers
    groups_lines: ClassVar[bool] = True

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
        grouper: LineGrouper | None = None,
    ) -> LogBatch:
        """Scan the listed files into records and settle the coverage status. `root`: the
        case or root directory the files were found under (part of each FileLine locator)."""
        with gc_paused():  # records, tuples and rows: acyclic (core/gcpause.py)
            batch, failed = self._read(jobs, ctx, anchors, window, cov, root, grouper)
        cov.errors = list(dict.fromkeys(cov.errors))  # a path two templates reached: once
        read_any = len(cov.nodes_read) + (1 if any(j.node == CLUSTER_NODE for j in jobs) else 0)
        cov.status = coverage_status(  # type: ignore[assignment]
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
        grouper: LineGrouper | None = None,
    ) -> tuple[LogBatch, int]:
        """Records of every job (cluster-level lines naming no job node dropped and counted)
        and the number of files that could not be read at all."""
        # Long on purpose: the per-record loop that turns scanner tuples into records; its cost
        # is per line, so it stays one frame
        results = self._scan_all(self._spec(ctx, anchors, window), jobs, grouper)
        index = NodeIndex.of(ctx)
        # a switch-side line (OpenSM, UFM, switch syslog) names a switch port, not a job node:
        # kept for the engine to map through the topology (the parser catalog says which)
        switch_side = tuple(a.literal for a in anchors if a.switch_side)
        records: list[RawRecord] = []
        tails: list[RawRecord] = []
        progress: list[RawRecord] = []
        failed = 0
        for job, (res, rows) in zip(jobs, results, strict=True):
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
            stream = job.path.name  # one string for every record of the file
            for lineno, t, quality, text, only, count, last_line, last_t, last_text in rows:
                # the whole record: a pretty-printed Event names its node lines after the
                # `"eventTime"` line the record starts at (the API door sees it whole)
                if (
                    job.node == CLUSTER_NODE
                    and not index.named_in(text)
                    and not any(lit in text for lit in switch_side)
                ):
                    cov.context_lines += 1
                    continue
                # built without validation: every value is the scanner's own, typed already
                records.append(
                    _record(
                        source="files",
                        node=job.node,
                        locator=_file_line(root=root, path=job.display, line=lineno),
                        time=t,
                        time_quality=quality,
                        time_latest=res.latest.get(lineno),
                        text=text,
                        stream=stream,
                        count=count,
                        time_last=last_t,
                        text_last=last_text,
                        locator_last=_file_line(root=root, path=job.display, line=last_line)
                        if last_line is not None
                        else None,
                        only=only,
                    )
                )
            rows.clear()  # the scanner's tuples, now records: free them file by file
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

    def _scan_all(
        self, spec: ScanSpec, jobs: list[FileJob], grouper: LineGrouper | None = None
    ) -> list[tuple[FileScan, list[tuple]]]:
        sizes = []
        for job in jobs:
            try:
                sizes.append(job.path.stat().st_size)
            except OSError:
                sizes.append(0)
        if sum(sizes) >= FAST_COUNT_MIN_BYTES and numpy_importable():
            # imported by each scanner (the workers), not here: the parent stays smaller
            spec = dataclasses.replace(spec, fast_count=True)
        workers = min(self.workers, len(jobs))
        if workers > 1 and sum(sizes) >= self.parallel_min_bytes:
            try:
                return self._scan_parallel(spec, jobs, sizes, workers, grouper)
            except (OSError, ValueError, RuntimeError, AssertionError):
                # no fork here (or a daemonic process, which may have no children): in-process
                pass
        scanner = FileScanner(spec)
        return [scan_rows(scanner, grouper, job.path, job.display, job.node) for job in jobs]

    @staticmethod
    def _scan_parallel(
        spec: ScanSpec,
        jobs: list[FileJob],
        sizes: list[int],
        workers: int,
        grouper: LineGrouper | None,
    ) -> list[tuple[FileScan, list[tuple]]]:
        # imported here: the pool's modules cost ~10 ms of every start, and a small case
        # (under parallel_min_bytes) is scanned in-process
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("fork")
        order = sorted(range(len(jobs)), key=lambda i: -sizes[i])  # big files first
        results: list[tuple[FileScan, list[tuple]] | None] = [None] * len(jobs)
        # the parent's objects (catalogs, models, the run so far) frozen while the workers
        # run: their collections (and ours meanwhile) no longer walk, nor copy-on-write
        # touch, what they inherited (nccl_init: collect 1.40-1.47 s -> 1.28 s)
        gc.freeze()
        try:
            with ProcessPoolExecutor(
                max_workers=workers,
                mp_context=ctx,
                initializer=_init_worker,
                initargs=(spec, grouper),
            ) as pool:
                futures = [
                    (task, pool.submit(_scan_in_worker, [_job_args(jobs[i]) for i in task]))
                    for task in chunks(order, sizes)
                ]
                for task, fut in futures:
                    for i, got in zip(task, fut.result(), strict=True):
                        results[i] = got
        finally:
            gc.unfreeze()
        return [r if r is not None else (FileScan(), []) for r in results]

"""Local-files connector: a case's `logs/<node>/...` and `metrics/*.prom` (spec section 1).

Reads only the job's nodes and window. Log files are prefiltered by the streaming scanner
(connectors/scan.py); when a case is large, files are scanned in parallel by a fork-based
process pool (files are independent), small cases stay in-process so they return in
milliseconds. Problems (missing nodes, unreadable or corrupt files, bad lines) end up in
SourceCoverage, never in a traceback.
"""

from __future__ import annotations

import gzip
import math
import multiprocessing
import os
import zlib
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from attribution_dagster.connectors.promtext import PromFile, iter_samples, sample_nodes
from attribution_dagster.connectors.scan import DEFAULT_BLOCK, FileScan, FileScanner, ScanSpec
from attribution_dagster.models import (
    Anchor,
    ExecutionContext,
    MetricSample,
    RawRecord,
    SourceCoverage,
    Window,
    short_host,
)

PARALLEL_MIN_BYTES = 32 * 1024 * 1024

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


def _short(name: str) -> str:
    return short_host(name)


def match_nodes(available: Sequence[str], nodes: Sequence[str]) -> dict[str, str]:
    """Map job node -> directory/label name: exact match first, else the same short host
    name (`node-a` vs `node-a.cluster.local`), so FQDN/short mismatches still line up."""
    names = set(available)
    by_short: dict[str, str] = {}
    for name in sorted(available):
        by_short.setdefault(_short(name), name)
    out: dict[str, str] = {}
    for node in nodes:
        if node in names:
            out[node] = node
        elif _short(node) in by_short:
            out[node] = by_short[_short(node)]
    return out


def _status(read: int, missing: int, errors: int, total_files: int, failed_files: int) -> str:
    if total_files and failed_files == total_files:
        return "failed"
    if read == 0:
        return "empty"
    return "partial" if missing or errors else "ok"


class LocalFilesClient:
    """Reads log and metric files of a case directory."""

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

    # -- logs ---------------------------------------------------------------------------
    def fetch_logs(
        self,
        case_dir: Path,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
    ) -> tuple[list[RawRecord], SourceCoverage]:
        case_dir = Path(case_dir)
        cov = SourceCoverage(source="files:logs")
        logs = case_dir / "logs"
        dirs = sorted(p.name for p in logs.iterdir() if p.is_dir()) if logs.is_dir() else []
        mapping = match_nodes(dirs, ctx.nodes)
        jobs: list[tuple[str, Path, str]] = []  # (node, path, display)
        used: set[str] = set()
        for node in dict.fromkeys(ctx.nodes):  # a node listed twice is read once
            if node not in mapping or mapping[node] in used:
                continue
            used.add(mapping[node])
            found = self._files_under(logs / mapping[node], case_dir)
            if found:
                cov.nodes_read.append(node)
                jobs.extend((node, path, display) for path, display in found)
        cov.nodes_missing = [n for n in ctx.nodes if n not in cov.nodes_read]
        ignored = sorted(set(dirs) - set(mapping.values()))
        if cov.nodes_missing and ignored:
            shown = ", ".join(ignored[:5]) + (" ..." if len(ignored) > 5 else "")
            cov.errors.append(f"logs/: ignored directories of nodes not in the job: {shown}")
        hits = [a for a in anchors if not a.last_only]
        spec = ScanSpec(
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
        )
        results = self._scan_all(spec, jobs)
        records: list[RawRecord] = []
        failed = 0
        for (node, path, display), res in zip(jobs, results, strict=True):
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
                records.append(
                    RawRecord(
                        source="files",
                        node=node,
                        locator=f"{display}:{lineno}",
                        time=t,
                        time_quality=quality,  # type: ignore[arg-type]
                        time_latest=res.latest.get(lineno),
                        text=text,
                        stream=path.name,
                    )
                )
            if res.progress is not None:  # where training stopped advancing (engine)
                lineno, t, quality, text = res.progress
                cov.file_progress.append(
                    RawRecord(
                        source="files",
                        node=node,
                        locator=f"{display}:{lineno}",
                        time=t,
                        time_quality=quality,  # type: ignore[arg-type]
                        text=text,
                        stream=path.name,
                    )
                )
            if res.tail is not None:  # where the file stops: silence of a node (engine)
                lineno, t, text = res.tail
                cov.file_tails.append(
                    RawRecord(
                        source="files",
                        node=node,
                        locator=f"{display}:{lineno}",
                        time=t,
                        text=text,
                        stream=path.name,
                        last_of_file=True,
                    )
                )
        cov.records = len(records)
        file_errors = sum(1 for e in cov.errors if not e.startswith("logs/:"))
        cov.status = _status(  # type: ignore[assignment]
            len(cov.nodes_read), len(cov.nodes_missing), file_errors, len(jobs), failed
        )
        return records, cov

    @staticmethod
    def _files_under(node_dir: Path, case_dir: Path) -> list[tuple[Path, str]]:
        out: list[tuple[Path, str]] = []
        for root, subdirs, names in os.walk(node_dir):
            subdirs.sort()
            for name in sorted(names):
                # everything is listed, so a dangling link or a FIFO is reported, not hidden
                path = Path(root) / name
                out.append((path, path.relative_to(case_dir).as_posix()))
        return out

    def _scan_all(self, spec: ScanSpec, jobs: list[tuple[str, Path, str]]) -> list[FileScan]:
        sizes = []
        for _, path, _ in jobs:
            try:
                sizes.append(path.stat().st_size)
            except OSError:
                sizes.append(0)
        workers = min(self.workers, len(jobs))
        if workers > 1 and sum(sizes) >= self.parallel_min_bytes:
            try:
                return self._scan_parallel(spec, jobs, sizes, workers)
            except (OSError, ValueError, RuntimeError):  # no fork here: fall back in-process
                pass
        scanner = FileScanner(spec)
        return [scanner.scan_path(path, display) for _, path, display in jobs]

    @staticmethod
    def _scan_parallel(
        spec: ScanSpec, jobs: list[tuple[str, Path, str]], sizes: list[int], workers: int
    ) -> list[FileScan]:
        ctx = multiprocessing.get_context("fork")
        order = sorted(range(len(jobs)), key=lambda i: -sizes[i])  # big files first
        results: list[FileScan | None] = [None] * len(jobs)
        with ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(spec,)
        ) as pool:
            futures = {i: pool.submit(_scan_in_worker, str(jobs[i][1]), jobs[i][2]) for i in order}
            for i, fut in futures.items():
                results[i] = fut.result()
        return [r if r is not None else FileScan() for r in results]

    # -- metrics ------------------------------------------------------------------------
    def fetch_metrics(
        self, case_dir: Path, ctx: ExecutionContext, window: Window
    ) -> tuple[list[MetricSample], SourceCoverage | None]:
        case_dir = Path(case_dir)
        mdir = case_dir / "metrics"
        if not mdir.is_dir():
            return [], None
        cov = SourceCoverage(source="files:metrics")
        paths = sorted(
            p for p in mdir.rglob("*") if p.is_file() and p.name.endswith((".prom", ".prom.gz"))
        )
        samples: list[MetricSample] = []
        seen_nodes: set[str] = set()
        label_nodes: dict[str, str | None] = {}
        failed = 0
        for path in paths:
            display = path.relative_to(case_dir).as_posix()
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
                                hit = match_nodes([raw_node], ctx.nodes)
                                label_nodes[raw_node] = next(iter(hit), None)
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
                                locator=f"{display}:{s.line}",
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

"""A case directory's own evidence: `logs/<node>/...` and `metrics/*.prom` (spec section 1).

Reads only the job's nodes and window (connectors/files/reader.py scans). Problems (missing
nodes, unreadable or corrupt files, bad lines) end up in SourceCoverage, never in a
traceback. A `logs/<dir>` whose name is no job node is a cluster-level source: its records
carry the node `CLUSTER_NODE` and only lines naming a job node are kept (the parser catalog
moves each observation to the node the line names); the others are counted as
`context_lines`. Case directories are read whole: their mtimes are those of whoever copied
them.
"""

from __future__ import annotations

import gzip
import math
import os
import zlib
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

from attribution_dagster.connectors.files.reader import (
    Confined,
    FileJob,
    Reader,
    coverage_status,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    LineGrouper,
    LogBatch,
    MetricFamily,
    MetricSample,
    SourceCoverage,
)
from attribution_dagster.core.formats.promtext import PromFile, iter_samples, sample_nodes
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.settings import Window


class LocalFilesClient(Reader):
    """Reads log and metric files of a case directory."""

    # -- logs ---------------------------------------------------------------------------
    def fetch_logs(
        self,
        case_dir: Path,
        ctx: ExecutionContext,
        anchors: Sequence[Anchor],
        window: Window,
        grouper: LineGrouper | None = None,
    ) -> LogBatch:
        """`logs/<node>/**` of the job's nodes (any spelling NodeIndex resolves), and every
        other `logs/<dir>/**` as a cluster-level source (spec section 1). With a `grouper`,
        a node's lines that state the same facts are folded as they are scanned."""
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
        return self._read_all(jobs, ctx, anchors, window, cov, str(case_dir), grouper)

    # -- metrics ------------------------------------------------------------------------
    def fetch_metrics(
        self,
        case_dir: Path,
        ctx: ExecutionContext,
        families: Sequence[MetricFamily],
        window: Window,
    ) -> tuple[list[MetricSample], SourceCoverage | None]:
        """Every sample of the case's `.prom` files. `families` (what the rules want) does not
        narrow the read: a case file is read whole either way, and a sample no rule consumes
        never becomes an observation."""
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
                        node = _sample_node(s.labels, index, label_nodes)
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
                        where = FileLine(root=str(case_dir), path=display, line=s.line)
                        samples.append(
                            MetricSample(source="files", node=node, locator=where, time=t,
                                         name=s.name, labels=s.labels, value=s.value)
                        )  # fmt: skip
            except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
                cov.errors.append(f"{display}: corrupt gzip ({exc or type(exc).__name__})")
                failed += 1
            except OSError as exc:
                cov.errors.append(f"{display}: unreadable ({exc.strerror or exc})")
                failed += 1
            cov.lines += parsed.lines
            cov.errors.extend(_file_notes(display, parsed, no_ts))
        cov.records = len(samples)
        cov.nodes_read = [n for n in ctx.nodes if n in seen_nodes]
        cov.nodes_missing = [n for n in ctx.nodes if n not in seen_nodes]
        cov.status = coverage_status(  # type: ignore[assignment]
            len(cov.nodes_read), len(cov.nodes_missing), len(cov.errors), len(paths), failed
        )
        return samples, cov


def _sample_node(
    labels: dict[str, str], index: NodeIndex, memo: dict[str, str | None]
) -> str | None:
    """The job node a sample's labels name (first that resolves), memoized per label value."""
    for raw_node in sample_nodes(labels):
        if raw_node not in memo:
            memo[raw_node] = index.resolve(raw_node)
        if memo[raw_node] is not None:
            return memo[raw_node]
    return None


def _file_notes(display: str, parsed: PromFile, no_ts: int) -> list[str]:
    """Coverage notes on one `.prom` file: malformed lines and samples without a time."""
    notes = []
    if parsed.malformed:
        notes.append(
            f"{display}: {len(parsed.malformed)} malformed line(s) skipped "
            f"(first at line {parsed.malformed[0]})"
        )
    if no_ts:
        notes.append(
            f"{display}: {no_ts} sample(s) without a timestamp skipped (cannot be placed in time)"
        )
    return notes

"""The one path from a case to a result. The CLI, the Dagster assets and the tests call these.

    load_context(case)                      -> ExecutionContext   (or a scheduler's get_job)
    collect_evidence(case, ctx, settings)   -> RawEvidence        (case files and/or the
                                                                   cluster's log/metric sources)
    normalize(raw, ctx)                     -> list[Observation]  (parser catalog)
    collect_topology(case, ctx, sources)    -> Topology | None    (case topology/ or the
                                                                   cluster's at job start)
    attribute(ctx, observations, coverage, topology=...) -> AttributionResult (rule engine)

Each step is a pure function of its inputs, so a Dagster asset can persist the output of
one step and the next asset can pick it up in another process.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attribution_dagster.connectors.base import (
    LogSource,
    MetricSource,
    SourceLimits,
    failed_coverage,
)
from attribution_dagster.connectors.clusters import Cluster, EvidenceSources
from attribution_dagster.connectors.files.case import LocalFilesClient
from attribution_dagster.connectors.static.client import StaticContextClient
from attribution_dagster.connectors.topology.source import (
    ClusterTopology,
    TopologySource,
    read_cluster_topology,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    LogBatch,
    RawEvidence,
    RawRecord,
    SourceCoverage,
)
from attribution_dagster.core.formats.flight_recorder import FlightDump, read_dump_dir, read_dumps
from attribution_dagster.core.gcpause import gc_paused
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.core.secrets import redact
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.core.topology import Topology
from attribution_dagster.rules import catalog as catalogs
from attribution_dagster.rules.engine import RuleEngine, hangs
from attribution_dagster.rules.parsers import ParserCatalog


def catalog() -> ParserCatalog:
    """The parser catalog every step of the pipeline uses (compiled once: rules/catalog.py)."""
    return catalogs.parsers()


def engine() -> RuleEngine:
    """The rule engine every step of the pipeline uses (loaded once: rules/catalog.py)."""
    return catalogs.engine()


def load_context(case: str | Path) -> ExecutionContext:
    """Read `<case>/context.json`; raises ContextError with the file and field named."""
    return StaticContextClient().load(Path(case))


def case_has_evidence(case: str | Path | None) -> bool:
    """A case directory with `logs/` or `metrics/` brings its own evidence; one holding only
    `context.json` takes it from its cluster's configured sources."""
    if case is None:
        return False
    case = Path(case)
    return (case / "logs").is_dir() or (case / "metrics").is_dir()


def collect_evidence(
    case: str | Path | None,
    ctx: ExecutionContext,
    settings: AnalysisSettings | None = None,
    files: LocalFilesClient | None = None,
    sources: EvidenceSources | None = None,
) -> RawEvidence:
    """Prefiltered log lines and metric samples for the job's nodes and window.

    Per kind of evidence, the case directory (`case`, else the context's `case_dir`) wins
    when it holds it (`logs/`, `metrics/`);
    the kinds it lacks come from `sources` (the cluster's back-ends), so a case with its
    own logs can take its metrics from Prometheus. A case with evidence and no source for
    the missing kind reads the case files only, as before. A source that fails is one
    `failed` coverage entry; the others still count.
    """
    settings = settings or AnalysisSettings()
    case = case if case is not None else ctx.case_dir
    raw = RawEvidence(job_id=ctx.job_id)
    log_sources = tuple(sources.logs) if sources else ()
    metric_sources = tuple(sources.metrics) if sources else ()
    if case_has_evidence(case):
        assert case is not None
        files = files or LocalFilesClient(
            max_line_bytes=settings.max_line_bytes, workers=settings.workers
        )
        case = Path(case)
        if (case / "logs").is_dir() or not log_sources:
            log_sources = ()
            _add_logs(
                raw,
                files.fetch_logs(
                    case, ctx, _anchors(), settings.window(ctx), **_grouping(files, ctx)
                ),
            )
        if (case / "metrics").is_dir() or not metric_sources:
            metric_sources = ()
            samples, cov = files.fetch_metrics(
                case, ctx, catalog().metric_families(), settings.window(ctx)
            )
            raw.samples.extend(samples)
            raw.coverage.extend([cov] if cov is not None else [])
    if log_sources or metric_sources:
        _read_sources(raw, ctx, settings, log_sources, metric_sources)
    elif not raw.coverage:
        where = f"{case} holds no logs/ or metrics/ and " if case is not None else ""
        raw.coverage.append(
            SourceCoverage(
                source="none",
                status="empty",
                nodes_missing=list(ctx.nodes),
                errors=[
                    f"{where}no evidence source is configured for cluster {ctx.cluster or '(none)'}"
                ],
            )
        )
    raw.dumps = collect_dumps(case, ctx, raw.coverage, sources)
    raw.topology = collect_topology(case, ctx, sources, raw.coverage)
    for cov in raw.coverage:  # a back-end's answer quoted in an error may echo a credential
        cov.errors = [redact(e) for e in cov.errors]
    return raw


def _anchors() -> list[Anchor]:
    """The catalog's anchors with the last_only ones (training progress): each source keeps
    only where progress stops (files: the last such line of a file; Loki: the last ones per
    node; pod logs: the last one of each container log)."""
    return catalog().anchors(last_only=True)


def _add_logs(raw: RawEvidence, batch: LogBatch) -> None:
    raw.records.extend(batch.records)
    raw.tails.extend(batch.tails)
    raw.progress.extend(batch.progress)
    raw.coverage.append(batch.coverage)


def _grouping(source: object, ctx: ExecutionContext) -> dict[str, Any]:
    """`grouper=` for a source that folds lines stating the same facts where it scans them
    (the files reader: rules/grouping.py), else nothing."""
    return {"grouper": catalog().grouper(ctx)} if getattr(source, "groups_lines", False) else {}


def _read_sources(
    raw: RawEvidence,
    ctx: ExecutionContext,
    settings: AnalysisSettings,
    log_sources: tuple[LogSource, ...],
    metric_sources: tuple[MetricSource, ...],
) -> None:
    """The cluster's back-ends, each in turn; one that fails is a `failed` coverage entry."""
    window = settings.window(ctx)
    limits = SourceLimits(max_line_bytes=settings.max_line_bytes)
    for log_source in log_sources:
        try:
            batch = log_source.fetch_logs(
                ctx, _anchors(), window, limits, **_grouping(log_source, ctx)
            )
        except Exception as exc:  # noqa: BLE001 - one source failing is partial evidence
            batch = LogBatch(coverage=failed_coverage(log_source.name, exc))
        # the contract says a source cuts its own lines; this enforces it (a no-op for a
        # conforming source, whose lines are already within the cap)
        batch.records = cut_lines(batch.records, batch.coverage, settings.max_line_bytes)
        _add_logs(raw, batch)
    families = catalog().metric_families()  # what the metric rules read
    for metric_source in metric_sources:
        try:
            samples, cov = metric_source.fetch_metrics(ctx, families, window)
        except Exception as exc:  # noqa: BLE001
            samples, cov = [], failed_coverage(metric_source.name, exc)
        raw.samples.extend(samples)
        raw.coverage.append(cov)


def collect_topology(
    case: str | Path | None,
    ctx: ExecutionContext,
    sources: EvidenceSources | None = None,
    coverage: list[SourceCoverage] | None = None,
) -> Topology | None:
    """Where the job's nodes sit in the fabric (issue 23): the case directory's `topology/`
    when it has one (`case`, else the context's `case_dir`), else the cluster's topology
    sources, each at the job's start (the snapshot in force when it ran), merged in
    configured order. Each source read is one `topology:<name>` entry in `coverage`; a
    source that fails is a `failed` entry and the others still count. None: no topology.

    Only the job's nodes are kept (with every switch: Topology.for_nodes), resolved as the
    parsers resolve host names (core.hosts.NodeIndex: `gpu-a01.cluster` is `gpu-a01`)."""
    case = case if case is not None else ctx.case_dir
    coverage = coverage if coverage is not None else []
    index = NodeIndex.of(ctx)
    if case is not None and (Path(case) / "topology").is_dir():
        # the readers of every topology form are imported only for a case that has one
        from attribution_dagster.core.formats.topology import read_topology_dir

        topo = read_topology_dir(Path(case) / "topology", label="topology")
        if topo is not None:
            topo = topo.for_nodes(lambda n: index.resolve(n) is not None)
        coverage.append(
            _topology_coverage("topology:files", topo)
            if topo is not None
            else SourceCoverage(
                source="topology:files",
                status="empty",
                errors=[f"{Path(case) / 'topology'} holds no topology file"],
            )
        )
        return topo
    topo_sources = tuple(sources.topology) if sources is not None else ()
    if not topo_sources:
        return None
    return topology_at(read_cluster_topology(ctx.cluster or "", topo_sources), ctx, coverage)


def topology_at(
    cluster_topology: ClusterTopology, ctx: ExecutionContext, coverage: list[SourceCoverage]
) -> Topology | None:
    """The cluster's topology at the job's start (the job's nodes only), one coverage entry
    per source."""
    merged: Topology | None = None
    index = NodeIndex.of(ctx)
    for src in cluster_topology.sources:
        name = f"topology:{src.source}"
        if src.error is not None:
            coverage.append(
                SourceCoverage(
                    source=name, status="failed", errors=[src.error], retryable=src.retryable
                )
            )
            continue
        snap = src.snapshots.snapshot_at(ctx.start)
        if snap is not None:
            snap = snap.for_nodes(lambda n: index.resolve(n) is not None)
        cov = _topology_coverage(name, snap)
        cov.errors = [*src.snapshots.errors, *cov.errors]
        if cov.errors and cov.status == "ok":
            cov.status = "partial"
        coverage.append(cov)
        if snap is not None:
            merged = snap if merged is None else merged.merged(snap)
    return merged


def cluster_topology(cluster: Cluster) -> ClusterTopology | None:
    """Every topology source of `cluster` read now (the Dagster `topology` asset's value);
    None when the cluster has no topology configured."""
    sources: tuple[TopologySource, ...] = cluster.topology_sources
    if not sources:
        return None
    return read_cluster_topology(cluster.name, sources)


def _topology_coverage(name: str, topo: Topology | None) -> SourceCoverage:
    if topo is None:
        return SourceCoverage(source=name, status="empty", errors=["no topology snapshot"])
    status = "ok" if not topo.errors else ("empty" if topo.is_empty() else "partial")
    return SourceCoverage(
        source=name,
        status=status,
        files=len(topo.sources),
        records=len(topo.cables) + len(topo.leaf_of) + len(topo.nvlink_domain_of),
        errors=list(topo.errors[:50]),
    )


def collect_dumps(
    case: str | Path | None,
    ctx: ExecutionContext,
    coverage: list[SourceCoverage],
    sources: EvidenceSources | None = None,
) -> list[FlightDump]:
    """The job's flight-recorder dumps, read with the restricted unpickler: the case's
    `dumps/`, else the cluster's dump directory (`dumps:` template in attribution.yaml). A
    refused or unreadable dump is a `files:dumps` coverage error (issue 18)."""
    if case is not None and (Path(case) / "dumps").is_dir():
        scan, source = read_dumps(Path(case), list(ctx.nodes)), "files:dumps"
    elif sources is not None and (where := sources.dump_dir(ctx.cluster, ctx.job_id)):
        if not where.is_dir():
            return []  # no timeout, no dump: an absent directory is not missing evidence
        scan, source = read_dump_dir(where, None, list(ctx.nodes)), "files:dumps"
    else:
        return []
    coverage.append(
        SourceCoverage(
            source=source,
            status="ok" if not scan.errors else ("partial" if scan.dumps else "failed"),
            files=scan.files,
            bytes=scan.bytes,
            records=len(scan.dumps),
            errors=scan.errors,
        )
    )
    return scan.dumps


def cut_lines(
    records: list[RawRecord], cov: SourceCoverage, max_line_bytes: int
) -> list[RawRecord]:
    """Each line of each record cut to `max_line_bytes` (UTF-8), counted as `overlong_lines`."""
    out = []
    for rec in records:
        parts = [p.encode("utf-8", "surrogatepass") for p in rec.text.split("\n")]
        over = sum(len(p) > max_line_bytes for p in parts)
        if not over:
            out.append(rec)
            continue
        cov.overlong_lines += over
        text = "\n".join(p[:max_line_bytes].decode("utf-8", "ignore") for p in parts)
        out.append(rec.model_copy(update={"text": text}))
    return out


def normalize(raw: RawEvidence, ctx: ExecutionContext, consume: bool = False) -> list[Observation]:
    """Typed observations, time-ordered (unknown times last); with `consume`, `raw.records`
    is emptied as they are parsed (their memory goes while the observations are built).
    Cycle collection waits until the end (core/gcpause.py: facts and observations hold no
    cycles; walking the heap for them was 15% of this)."""
    with gc_paused():
        observations = catalog().normalize(raw, ctx, consume=consume)
        if raw.dumps:
            observations = hangs.with_dump_observations(observations, raw.dumps, ctx)
    return observations


def attribute(
    ctx: ExecutionContext,
    observations: list[Observation],
    coverage: list[SourceCoverage],
    settings: AnalysisSettings | None = None,
    topology: Topology | None = None,
) -> AttributionResult:
    """The rule engine's verdict; with the cluster's `topology` (the snapshot in force when the
    job ran), switch-side lines count as evidence and a network or NVLink cause gets its
    `fault_domain`. Cycle collection waits, as in `normalize`."""
    with gc_paused():
        result = engine().attribute(
            ctx, observations, coverage, settings or AnalysisSettings(), topology=topology
        )
    return result.model_copy(update={"analyzed_at": datetime.now(timezone.utc)})


def analyze_case(
    case: str | Path,
    settings: AnalysisSettings | None = None,
    sources: EvidenceSources | None = None,
) -> AttributionResult:
    """The whole chain for one case directory (its own evidence, else `sources`)."""
    settings = settings or AnalysisSettings()
    ctx = load_context(case)
    return analyze_context(ctx, settings, case=case, sources=sources)


def analyze_context(
    ctx: ExecutionContext,
    settings: AnalysisSettings | None = None,
    *,
    case: str | Path | None = None,
    sources: EvidenceSources | None = None,
) -> AttributionResult:
    settings = settings or AnalysisSettings()
    raw = collect_evidence(case, ctx, settings, sources=sources)
    observations = normalize(raw, ctx, consume=True)  # only coverage and topology remain used
    return attribute(ctx, observations, raw.coverage, settings, topology=raw.topology)


def analyze_job(
    cluster: Cluster, job_id: str, settings: AnalysisSettings | None = None
) -> AttributionResult:
    """A job known to a cluster's scheduler, with evidence from the cluster's sources."""
    ctx = cluster.scheduler.get_job(job_id)
    return analyze_context(ctx, settings, sources=cluster.sources)

"""The one path from a case to a result. The CLI, the Dagster assets and the tests call these.

    load_context(case)                      -> ExecutionContext
    collect_evidence(case, ctx, settings)   -> RawEvidence        (files connector, prefiltered)
    normalize(raw, ctx)                     -> list[Observation]  (parser catalog)
    attribute(ctx, observations, coverage)  -> AttributionResult  (rule engine)

Each step is a pure function of its inputs, so a Dagster asset can persist the output of
one step and the next asset can pick it up in another process.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from attribution_dagster.connectors.files import LocalFilesClient
from attribution_dagster.connectors.static import StaticContextClient
from attribution_dagster.models import (
    AnalysisSettings,
    AttributionResult,
    ExecutionContext,
    Observation,
    RawEvidence,
    SourceCoverage,
)
from attribution_dagster.rules.engine import RuleEngine, load_engine
from attribution_dagster.rules.parsers import ParserCatalog, load_catalog

_catalog: ParserCatalog | None = None
_engine: RuleEngine | None = None


def catalog() -> ParserCatalog:
    global _catalog
    if _catalog is None:
        _catalog = load_catalog()
    return _catalog


def engine() -> RuleEngine:
    global _engine
    if _engine is None:
        _engine = load_engine()
    return _engine


def load_context(case: str | Path) -> ExecutionContext:
    """Read `<case>/context.json`; raises ContextError with the file and field named."""
    return StaticContextClient().load(Path(case))


def collect_evidence(
    case: str | Path,
    ctx: ExecutionContext,
    settings: AnalysisSettings | None = None,
    files: LocalFilesClient | None = None,
) -> RawEvidence:
    """Prefiltered log lines and metric samples for the job's nodes and window."""
    settings = settings or AnalysisSettings()
    files = files or LocalFilesClient(
        max_line_bytes=settings.max_line_bytes, workers=settings.workers
    )
    window = settings.window(ctx)
    case = Path(case)
    records, log_cov = files.fetch_logs(case, ctx, catalog().anchors(), window)
    samples, metric_cov = files.fetch_metrics(case, ctx, window)
    coverage = [log_cov] + ([metric_cov] if metric_cov is not None else [])
    return RawEvidence(job_id=ctx.job_id, records=records, samples=samples, coverage=coverage)


def normalize(raw: RawEvidence, ctx: ExecutionContext) -> list[Observation]:
    """Typed observations, time-ordered (unknown times last)."""
    return catalog().normalize(raw, ctx)


def attribute(
    ctx: ExecutionContext,
    observations: list[Observation],
    coverage: list[SourceCoverage],
    settings: AnalysisSettings | None = None,
) -> AttributionResult:
    result = engine().attribute(ctx, observations, coverage, settings or AnalysisSettings())
    return result.model_copy(update={"analyzed_at": datetime.now(timezone.utc)})


def analyze_case(case: str | Path, settings: AnalysisSettings | None = None) -> AttributionResult:
    """The whole chain for one case directory."""
    settings = settings or AnalysisSettings()
    ctx = load_context(case)
    raw = collect_evidence(case, ctx, settings)
    observations = normalize(raw, ctx)
    return attribute(ctx, observations, raw.coverage, settings)

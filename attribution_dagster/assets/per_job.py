"""The four per-job assets: execution_context -> raw_evidence -> observations -> attribution.

Thin wiring over `attribution_dagster.pipeline`, the very functions the CLI calls.

Every asset handles one partition (the sensor path: one run per finished job) or many
(backfills and `local_run`: a run costs seconds, a job's work milliseconds). Values
persist per (asset, partition) through `AssetStoreResource`, not through an IO manager,
so a run over 100 partitions works; each asset returns only metadata.

Failures:
- one partition per run: errors propagate. `raw_evidence` carries a `RetryPolicy`, so a
  failed fetch is retried, and a job that still fails fails its own run only.
- several partitions per run: each partition is isolated. A failing partition is retried
  inline (`fetch_retries`), then recorded as failed in the store and skipped by the later
  assets, which say so in that partition's metadata; the other partitions go on. The
  last asset, `attribution`, reports a materialization for each partition that produced a
  result and then raises a `Failure` naming the failed ones: the run ends failed, and
  Dagster marks exactly those partitions of `attribution` as failed while the others are
  materialized and written to the sink.
"""

import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetMaterialization,
    AssetsDefinition,
    BackfillPolicy,
    Backoff,
    DynamicPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    RetryPolicy,
    asset,
)
from dagster._utils.warnings import BetaWarning
from pydantic import BaseModel, Field

from attribution_dagster import pipeline
from attribution_dagster.assets import metadata as md
from attribution_dagster.assets.checks import (
    CONTRACT_CHECK,
    COVERAGE_CHECK,
    contract_problems,
    coverage_gaps,
)
from attribution_dagster.models import (
    AttributionResult,
    ExecutionContext,
    Observation,
    RawEvidence,
    SourceCoverage,
)
from attribution_dagster.resources import (
    AnalysisSettingsResource,
    AssetStoreResource,
    LocalFilesResource,
    SqlSinkResource,
    StaticCasesResource,
    StdoutSinkResource,
)
from attribution_dagster.sinks.asset_store import AssetValueStore, StoredValue

JOBS_PARTITIONS = DynamicPartitionsDefinition(name="jobs")
GROUP = "attribution"
ASSET_NAMES = ("execution_context", "raw_evidence", "observations", "attribution")


class StoredContext(BaseModel):
    case_dir: str
    context: ExecutionContext


class ObservationSet(BaseModel):
    """What `observations` hands to `attribution`: the events plus the sources' coverage."""

    observations: list[Observation] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)


class _Outcome:
    """Per-partition values, failures and metadata of one asset step."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.failures: dict[str, str] = {}
        self.metadata: dict[str, dict[str, Any]] = {}


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip()


def _run_partitions(
    context: AssetExecutionContext,
    store: AssetValueStore,
    asset_name: str,
    upstream: str | None,
    compute: Callable[[str, StoredValue | None], tuple[str, dict[str, Any]]],
    retries: int = 0,
    retry_delay: float = 0.0,
) -> _Outcome:
    """Run `compute(partition_key, upstream_value)` for each partition of the step."""
    keys = list(context.partition_keys)
    batched = len(keys) > 1
    ups = store.get(upstream, keys) if upstream else {}
    out = _Outcome()
    for pk in keys:
        up = ups.get(pk) if upstream else None
        if upstream and (up is None or not up.ok):
            reason = (
                f"upstream {upstream} failed: {up.error}"
                if up is not None
                else f"upstream {upstream} has no value for this partition; materialize it first"
            )
            if not batched:
                store.put(asset_name, failures={pk: reason})
                # Retrying cannot help: the upstream value is missing or failed.
                raise Failure(description=f"{pk}: {reason}", allow_retries=False)
            out.failures[pk] = reason
            continue
        attempt = 0
        while True:
            try:
                out.values[pk], out.metadata[pk] = compute(pk, up)
                break
            except Exception as exc:  # noqa: BLE001 - isolate one job's failure
                if not batched:
                    store.put(asset_name, failures={pk: _reason(exc)})
                    raise
                if attempt < retries:
                    attempt += 1
                    context.log.warning(f"{asset_name} {pk}: {_reason(exc)}; retry {attempt}")
                    time.sleep(retry_delay * attempt)
                    continue
                out.failures[pk] = _reason(exc)
                context.log.warning(f"{asset_name} {pk} failed: {_reason(exc)}")
                break
    store.put(asset_name, values=out.values, failures=out.failures)
    return out


def _result(context: AssetExecutionContext, out: _Outcome) -> MaterializeResult:
    """One partition: its metadata. Several: per-partition metadata plus a batch summary."""
    keys = list(context.partition_keys)
    if len(keys) == 1:
        return MaterializeResult(metadata=out.metadata.get(keys[0], {}))
    batch = {
        "batch: partitions": MetadataValue.int(len(keys)),
        "batch: failed": MetadataValue.int(len(out.failures)),
    }
    # Per partition, so each job's page lists its own facts first.
    for pk, meta in out.metadata.items():
        context.add_asset_metadata({**meta, **batch}, partition_key=pk)
    for pk, reason in out.failures.items():
        context.add_asset_metadata({"FAILED": reason, **batch}, partition_key=pk)
    return MaterializeResult()


def build_job_assets(
    max_partitions_per_run: int = 100,
    fetch_retry: RetryPolicy | None = None,
) -> list[AssetsDefinition]:
    """The four per-job assets; the backfill policy batches up to N partitions per run."""
    with warnings.catch_warnings():
        # backfill_policy is "beta" in Dagster 1.13; it is what makes batching possible.
        warnings.simplefilter("ignore", BetaWarning)
        return _build(max_partitions_per_run, fetch_retry)


def _build(max_partitions_per_run: int, fetch_retry: RetryPolicy | None) -> list[AssetsDefinition]:
    policy = BackfillPolicy.multi_run(max_partitions_per_run=max_partitions_per_run)
    retry = fetch_retry or RetryPolicy(max_retries=2, delay=2, backoff=Backoff.EXPONENTIAL)
    common: dict[str, Any] = {
        "partitions_def": JOBS_PARTITIONS,
        "backfill_policy": policy,
        "group_name": GROUP,
    }

    @asset(
        **common,
        description="Who ran where, when, and how it ended: the job's ExecutionContext.",
        kinds={"python"},
    )
    def execution_context(
        context: AssetExecutionContext,
        cases: StaticCasesResource,
        store: AssetStoreResource,
    ) -> MaterializeResult:
        s = store.get_store()
        keys = list(context.partition_keys)
        dirs = s.case_dirs(keys)
        missing = [k for k in keys if k not in dirs]
        if missing:  # not registered through the sensor or local_run: look under case_root
            found: dict[str, str] = {}
            for case in cases.list_cases():
                try:
                    key = cases.load(case).partition_key
                except Exception:  # noqa: BLE001 - malformed cases are reported by the sensor
                    continue
                if key in missing and key not in found:
                    found[key] = str(case)
            s.index_cases(found)
            dirs.update(found)

        def compute(pk: str, _up: StoredValue | None) -> tuple[str, dict[str, Any]]:
            case_dir = dirs.get(pk)
            if case_dir is None:
                raise Failure(
                    description=f"no case directory for partition {pk} "
                    f"(looked in the case index and under {cases.root})"
                )
            ctx = cases.load(case_dir)
            if ctx.partition_key != pk:
                raise Failure(
                    description=f"{case_dir}/context.json now describes {ctx.partition_key}, "
                    f"not {pk}"
                )
            value = StoredContext(case_dir=case_dir, context=ctx).model_dump_json()
            return value, md.context_metadata(ctx, case_dir)

        return _result(context, _run_partitions(context, s, "execution_context", None, compute))

    @asset(
        **common,
        deps=[execution_context],
        retry_policy=retry,
        description="Prefiltered log lines and metric samples for the job's nodes and window, "
        "with per-source coverage.",
        kinds={"python"},
    )
    def raw_evidence(
        context: AssetExecutionContext,
        files: LocalFilesResource,
        analysis: AnalysisSettingsResource,
        store: AssetStoreResource,
    ) -> MaterializeResult:
        s = store.get_store()
        settings = analysis.settings()
        client = files.client()

        def compute(pk: str, up: StoredValue | None) -> tuple[str, dict[str, Any]]:
            stored = StoredContext.model_validate_json(up.payload or "")
            raw = pipeline.collect_evidence(stored.case_dir, stored.context, settings, files=client)
            return raw.model_dump_json(), md.evidence_metadata(stored.context, raw)

        out = _run_partitions(
            context,
            s,
            "raw_evidence",
            "execution_context",
            compute,
            retries=analysis.fetch_retries,
            retry_delay=analysis.fetch_retry_delay_seconds,
        )
        return _result(context, out)

    @asset(
        **common,
        deps=[raw_evidence],
        description="Typed observations (XID, NCCL timeout, IB link down, OOM, ...) parsed "
        "from the raw evidence, time-ordered.",
        kinds={"python"},
    )
    def observations(
        context: AssetExecutionContext, store: AssetStoreResource
    ) -> MaterializeResult:
        s = store.get_store()
        contexts = s.get("execution_context", context.partition_keys)

        def compute(pk: str, up: StoredValue | None) -> tuple[str, dict[str, Any]]:
            ctx_value = contexts.get(pk)
            if ctx_value is None or not ctx_value.ok:
                raise Failure(description=f"{pk}: execution_context has no value")
            ctx = StoredContext.model_validate_json(ctx_value.payload or "").context
            raw = RawEvidence.model_validate_json(up.payload or "")
            obs = pipeline.normalize(raw, ctx)
            value = ObservationSet(observations=obs, coverage=raw.coverage).model_dump_json()
            return value, md.observations_metadata(obs)

        return _result(
            context, _run_partitions(context, s, "observations", "raw_evidence", compute)
        )

    @asset(
        **common,
        deps=[observations],
        description="Root cause vs symptoms: category, suspect nodes, symptom chain, evidence. "
        "Written to the result sinks.",
        kinds={"python", "sql"},
        check_specs=[
            AssetCheckSpec(
                CONTRACT_CHECK,
                asset="attribution",
                description="the result validates against the result contract",
            ),
            AssetCheckSpec(
                COVERAGE_CHECK,
                asset="attribution",
                description="every node of the job produced some evidence, or the gap is stated",
            ),
        ],
    )
    def attribution(
        context: AssetExecutionContext,
        store: AssetStoreResource,
        sink: SqlSinkResource,
        stdout: StdoutSinkResource,
        analysis: AnalysisSettingsResource,
    ) -> Iterator[Any]:
        s = store.get_store()
        settings = analysis.settings()
        keys = list(context.partition_keys)
        batched = len(keys) > 1
        contexts = s.get("execution_context", keys)
        results: dict[str, AttributionResult] = {}
        job_contexts: dict[str, ExecutionContext] = {}

        def compute(pk: str, up: StoredValue | None) -> tuple[str, dict[str, Any]]:
            ctx_value = contexts.get(pk)
            if ctx_value is None or not ctx_value.ok:
                raise Failure(description=f"{pk}: execution_context has no value")
            ctx = StoredContext.model_validate_json(ctx_value.payload or "").context
            obs = ObservationSet.model_validate_json(up.payload or "")
            result = pipeline.attribute(ctx, obs.observations, obs.coverage, settings)
            results[pk] = result
            job_contexts[pk] = ctx
            return result.model_dump_json(), md.attribution_metadata(result)

        out = _run_partitions(context, s, "attribution", "observations", compute)
        if results:
            sink.get_sink().write(results.values())
            printer = stdout.get_sink()
            if printer is not None:
                printer.write(results.values())

        checks = _check_results(results, job_contexts)
        if batched and out.failures:
            for pk, meta in out.metadata.items():
                yield AssetMaterialization(asset_key=context.asset_key, partition=pk, metadata=meta)
            yield from checks
            failed = sorted(out.failures)
            raise Failure(
                description=f"{len(failed)} of {len(keys)} jobs failed: "
                + "; ".join(f"{k}: {out.failures[k]}" for k in failed[:20]),
                metadata={"failed partitions": ", ".join(failed)},
                allow_retries=False,
            )
        result = _result(context, out)
        yield MaterializeResult(metadata=result.metadata, check_results=checks)

    return [execution_context, raw_evidence, observations, attribution]


def _check_results(
    results: dict[str, AttributionResult], contexts: dict[str, ExecutionContext]
) -> list[AssetCheckResult]:
    """Both checks over the partitions of this step (one in the sensor path)."""
    contract_bad: dict[str, list[str]] = {}
    stated: dict[str, list[str]] = {}
    silent: dict[str, list[str]] = {}
    for pk, result in results.items():
        problems = contract_problems(result)
        if problems:
            contract_bad[pk] = problems
        gaps, missing = coverage_gaps(contexts[pk], result)
        if gaps:
            stated[pk] = gaps
        if missing:
            silent[pk] = missing
    contract_md = md.md_table(
        ["job", "problem"],
        [[pk, p] for pk, ps in sorted(contract_bad.items()) for p in ps][: md.MAX_ROWS],
    )
    gap_rows = [[pk, ", ".join(n), "stated"] for pk, n in sorted(stated.items())] + [
        [pk, ", ".join(n), "NOT stated"] for pk, n in sorted(silent.items())
    ]
    return [
        AssetCheckResult(
            check_name=CONTRACT_CHECK,
            asset_key="attribution",
            passed=not contract_bad,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "jobs checked": MetadataValue.int(len(results)),
                "jobs breaking the contract": MetadataValue.int(len(contract_bad)),
                **({"problems": MetadataValue.md(contract_md)} if contract_bad else {}),
            },
        ),
        AssetCheckResult(
            check_name=COVERAGE_CHECK,
            asset_key="attribution",
            passed=not silent,
            severity=AssetCheckSeverity.WARN,
            metadata={
                "jobs checked": MetadataValue.int(len(results)),
                "jobs with a stated gap": MetadataValue.int(len(stated)),
                "jobs with an unstated gap": MetadataValue.int(len(silent)),
                **(
                    {
                        "gaps": MetadataValue.md(
                            md.md_table(["job", "nodes", "gap"], gap_rows[: md.MAX_ROWS])
                        )
                    }
                    if gap_rows
                    else {}
                ),
            },
        ),
    ]

"""The per-job assets: execution_context -> raw_evidence -> observations -> attribution.

Each is a function over `attribution_dagster.pipeline`, the very code the CLI calls; every
job is a partition of `jobs` (registered by the finished-job and case-directory sensors).
`for_each_job` (assets/job_batch.py) runs a step over all the jobs of a run: one job on
the sensor path, up to `max_partitions_per_run` in a backfill, each job's failure
isolated. Values persist per job in the asset store; each asset returns only metadata.
"""

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetMaterialization,
    AssetsDefinition,
    BackfillPolicy,
    DynamicPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import BaseModel, Field

from attribution_dagster import pipeline
from attribution_dagster.assets import metadata as md
from attribution_dagster.assets.checks import (
    CONTRACT_CHECK,
    COVERAGE_CHECK,
    VERDICT_CHECK,
    contract_problems,
    coverage_gaps,
    needs_a_look,
    partitioned_check,
    verdict_evaluations,
)
from attribution_dagster.assets.job_batch import HANDOFF, for_each_job, materialize_result
from attribution_dagster.assets.topology import stored_topology
from attribution_dagster.connectors.base import JobNotFound, SourceError
from attribution_dagster.connectors.topology.source import ClusterTopology
from attribution_dagster.core.context import KEY_HASH_MARK, ExecutionContext
from attribution_dagster.core.evidence import RawEvidence, SourceCoverage
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.core.topology import Topology
from attribution_dagster.resources import (
    AnalysisSettingsResource,
    AssetStoreResource,
    ClustersResource,
    LocalFilesResource,
    SqlSinkResource,
    StaticCasesResource,
    StdoutSinkResource,
)
from attribution_dagster.resources.value_store import AssetValueStore

JOBS_PARTITIONS = DynamicPartitionsDefinition(name="jobs")
GROUP = "attribution"
ASSET_NAMES = ("execution_context", "raw_evidence", "observations", "attribution")
PER_JOB: dict[str, Any] = {"partitions_def": JOBS_PARTITIONS, "group_name": GROUP}


class ObservationSet(BaseModel):
    """What `observations` hands to `attribution`: the events plus the sources' coverage,
    and the topology the job is read against (raw evidence's, passed on unchanged)."""

    observations: list[Observation] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)
    topology: Topology | None = None


@asset(
    **PER_JOB,
    description="Who ran where, when, and how it ended: the job's ExecutionContext, as its "
    "scheduler reported it, or from a case directory's context.json.",
    kinds={"python"},
)
def execution_context(
    context: AssetExecutionContext,
    store: AssetStoreResource,
    cases: StaticCasesResource,
    clusters: ClustersResource,
) -> MaterializeResult:
    s = store.client()
    keys = list(context.partition_keys)
    registered, case_dirs = _registered(s, keys, cases, clusters)
    scanned: dict[str, str] = {}  # the case root, read at most once per run

    def resolve(key: str, _up: str | None, _last: bool) -> tuple[ExecutionContext, dict[str, Any]]:
        if key in registered:
            ctx = registered[key]
        elif key in case_dirs:
            ctx = _from_case(key, case_dirs[key], cases)
        else:
            try:
                ctx = _ask_scheduler(key, clusters, cases)
            except JobNotFound:
                # The key's job id is sanitized (`team/llm` -> `team_llm`), so the scheduler
                # may not know it by that name: the case root may still hold the job.
                if not scanned:
                    unknown = [k for k in keys if k not in registered and k not in case_dirs]
                    scanned.update(_scan_case_root(s, unknown, cases) or {"": ""})
                if key not in scanned:
                    raise
                ctx = _from_case(key, scanned[key], cases)
        return ctx, md.context_metadata(ctx, ctx.case_dir)

    return materialize_result(context, for_each_job(context, s, resolve))


def _raw_evidence_asset(topology_deps: Sequence[AssetKey] = ()) -> AssetsDefinition:
    """`raw_evidence`, depending on the per-cluster topology assets when there are some
    (assets/topology.py), so a verdict's lineage shows the topology it was read against."""

    @asset(
        **PER_JOB,
        name="raw_evidence",
        deps=[execution_context, *topology_deps],
        description="Prefiltered log lines and metric samples for the job's nodes and window, "
        "from its case or its cluster's log and metric back-ends, with per-source coverage, "
        "and the topology snapshot in force when the job ran.",
        kinds={"python"},
    )
    def _raw_evidence(
        context: AssetExecutionContext,
        store: AssetStoreResource,
        files: LocalFilesResource,
        clusters: ClustersResource,
        analysis: AnalysisSettingsResource,
    ) -> MaterializeResult:
        settings = analysis.client()
        client = files.client()
        s = store.client()
        stored: dict[str, ClusterTopology | None] = {}

        def fetch(key: str, up: str | None, last_try: bool) -> tuple[RawEvidence, dict[str, Any]]:
            job = ExecutionContext.model_validate_json(up or "")
            cluster = clusters.client().get(job.cluster)
            sources = cluster.sources if cluster is not None else None
            if sources is not None and sources.topology:
                # the cluster's topology asset, when materialized: the snapshots the
                # lineage names (else the sources are read now)
                name = job.cluster or ""
                if name not in stored:
                    stored[name] = stored_topology(s, name)
                value = stored[name]
                if value is not None:
                    sources = replace(sources, topology=value.as_sources())
            raw = pipeline.collect_evidence(
                None,  # the context's case_dir, when it came from a case
                job,
                settings,
                files=client,
                sources=sources,
            )
            transient = [c for c in raw.coverage if c.retryable]
            if transient and not last_try:
                raise SourceError(
                    "; ".join(
                        f"{c.source}: {c.errors[0] if c.errors else c.status}" for c in transient
                    ),
                    transient=True,
                )
            return raw, md.evidence_metadata(job, raw)

        batch = for_each_job(
            context,
            s,
            fetch,
            upstream="execution_context",
            retries=analysis.fetch_retries,
            retry_delay=analysis.fetch_retry_delay_seconds,
            hand_on=True,
        )
        return materialize_result(context, batch)

    return _raw_evidence


raw_evidence = _raw_evidence_asset()


@asset(
    **PER_JOB,
    deps=[raw_evidence],
    description="Typed observations (XID, NCCL timeout, IB link down, OOM, ...) parsed "
    "from the raw evidence, time-ordered.",
    kinds={"python"},
)
def observations(context: AssetExecutionContext, store: AssetStoreResource) -> MaterializeResult:
    s = store.client()
    contexts = _stored_contexts(s, context.partition_keys)

    def parse(key: str, up: str | None, _last: bool) -> tuple[ObservationSet, dict[str, Any]]:
        raw = HANDOFF.take(RawEvidence, key, up or "")
        obs = pipeline.normalize(raw, _context_of(contexts, key), consume=True)
        value = ObservationSet(observations=obs, coverage=raw.coverage, topology=raw.topology)
        return value, md.observations_metadata(obs)

    batch = for_each_job(context, s, parse, upstream="raw_evidence", hand_on=True)
    return materialize_result(context, batch)


@asset(
    **PER_JOB,
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
        partitioned_check(
            VERDICT_CHECK,
            "attribution",
            JOBS_PARTITIONS,
            "WARN when the job needs a look: ambiguous, unattributed, or read from partial data",
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
    s = store.client()
    settings = analysis.client()
    contexts = _stored_contexts(s, context.partition_keys)

    def decide(key: str, up: str | None, _last: bool) -> tuple[AttributionResult, dict[str, Any]]:
        obs = HANDOFF.take(ObservationSet, key, up or "")
        result = pipeline.attribute(
            _context_of(contexts, key),
            obs.observations,
            obs.coverage,
            settings,
            topology=obs.topology,
        )
        return result, md.attribution_metadata(result) | md.topology_metadata(obs.topology)

    batch = for_each_job(context, s, decide, upstream="observations")
    results: dict[str, AttributionResult] = batch.values  # type: ignore[assignment]
    if results:
        # The contexts give the weekly report end times and GPU-hours (attribution_jobs).
        jobs = [_context_of(contexts, k) for k in results]
        sink.client().write(results.values(), contexts=jobs)
        printer = stdout.client()
        if printer is not None:
            printer.write(results.values())
    checks = _check_results(results, {k: _context_of(contexts, k) for k in results})
    verdicts = {k: (needs_a_look(r), _verdict_meta(r)) for k, r in results.items()}
    if batch.batched and batch.failures:
        # Report what succeeded, then fail the run naming the jobs that did not.
        for key, meta in batch.metadata.items():
            yield AssetMaterialization(asset_key=context.asset_key, partition=key, metadata=meta)
        yield from checks
        yield from verdict_evaluations(context, verdicts)
        failed = sorted(batch.failures)
        raise Failure(
            description=f"{len(failed)} of {len(batch.keys)} jobs failed: "
            + "; ".join(f"{k}: {batch.failures[k]}" for k in failed[:20]),
            metadata={"failed partitions": ", ".join(failed)},
            allow_retries=False,
        )
    yield MaterializeResult(
        metadata=materialize_result(context, batch).metadata, check_results=checks
    )
    yield from verdict_evaluations(context, verdicts)


def _verdict_meta(result: AttributionResult) -> dict[str, Any]:
    v = md.verdict_metadata(result)
    return {k: v[k] for k in ("status", "category", "look first at") if k in v}


PER_JOB_ASSETS: list[AssetsDefinition] = [
    execution_context,
    raw_evidence,
    observations,
    attribution,
]


def build_job_assets(
    max_partitions_per_run: int = 100, topology_deps: Sequence[AssetKey] = ()
) -> list[AssetsDefinition]:
    """The four assets with their backfill batch size (`max_partitions_per_run` jobs a run);
    `raw_evidence` depends on the per-cluster topology assets `topology_deps`."""
    policy = BackfillPolicy.multi_run(max_partitions_per_run=max_partitions_per_run)
    assets = list(PER_JOB_ASSETS)
    if topology_deps:
        assets[1] = _raw_evidence_asset(topology_deps)
    return [a.with_attributes(backfill_policy=policy) for a in assets]


# -- where a job's context comes from -------------------------------------------------------


def _registered(
    store: AssetValueStore,
    keys: list[str],
    cases: StaticCasesResource,
    clusters: ClustersResource,
) -> tuple[dict[str, ExecutionContext], dict[str, str]]:
    """Jobs registered by a sensor or local_run: a scheduler's context, or a case directory."""
    found = store.indexed_contexts(keys)
    dirs = store.case_dirs([k for k in keys if k not in found])
    missing = [k for k in keys if k not in found and k not in dirs]
    if missing and not all(clusters.client().get(_cluster_of(k)) for k in missing):
        # Not registered, and no scheduler to ask: look under the case root (slow path).
        dirs.update(_scan_case_root(store, missing, cases))
    return found, dirs


def _scan_case_root(
    store: AssetValueStore, keys: list[str], cases: StaticCasesResource
) -> dict[str, str]:
    """Case directories under the case root for these keys (indexed for the next run)."""
    wanted = set(keys)
    late: dict[str, str] = {}
    try:
        listed = cases.list_cases()
    except Exception:  # noqa: BLE001 - no case root: nothing found here
        return {}
    for case in listed:
        try:
            key = cases.load(case).partition_key
        except Exception:  # noqa: BLE001 - malformed cases are the sensor's to report
            continue
        if key in wanted and key not in late:
            late[key] = str(case)
    store.index_cases(late)
    return late


def _from_case(key: str, case_dir: str, cases: StaticCasesResource) -> ExecutionContext:
    ctx = cases.load(case_dir)
    if ctx.partition_key != key:
        raise Failure(
            description=f"{case_dir}/context.json now describes {ctx.partition_key}, not {key}",
            allow_retries=False,
        )
    return ctx.model_copy(update={"case_dir": case_dir})


def _cluster_of(key: str) -> str:
    return key.split(".", 1)[0]


def _ask_scheduler(
    key: str, clusters: ClustersResource, cases: StaticCasesResource
) -> ExecutionContext:
    """A job nobody registered: ask the scheduler of the cluster its key names."""
    cluster_name, _, job_id = key.partition(".")
    cluster = clusters.client().get(cluster_name)
    if cluster is None or cluster.config.scheduler is None or not job_id:
        raise Failure(
            description=f"no case directory for partition {key} (looked in the case index and "
            f"under {cases.root}) and no scheduler configured for cluster {cluster_name!r}",
            allow_retries=False,
        )
    if KEY_HASH_MARK in job_id:
        # a cleaned or cut key (job_partition_key): the job id is not in it; the sensor
        # that registered the key indexed the context, or the case root holds the job
        raise JobNotFound(
            f"{key} is a shortened partition key: the job's id is not in it, and neither "
            "the case index nor a sensor's registration holds its context"
        )
    return cluster.scheduler.get_job(job_id)


def _stored_contexts(store: AssetValueStore, keys: Any) -> dict[str, ExecutionContext]:
    values = store.get("execution_context", list(keys))
    return {
        k: ExecutionContext.model_validate_json(v.payload or "") for k, v in values.items() if v.ok
    }


def _context_of(contexts: dict[str, ExecutionContext], key: str) -> ExecutionContext:
    ctx = contexts.get(key)
    if ctx is None:
        raise Failure(description=f"{key}: execution_context has no value", allow_retries=False)
    return ctx


def _check_results(
    results: dict[str, AttributionResult], contexts: dict[str, ExecutionContext]
) -> list[AssetCheckResult]:
    """Both checks over the jobs of this step (one on the sensor path)."""
    contract_bad: dict[str, list[str]] = {}
    stated: dict[str, list[str]] = {}
    silent: dict[str, list[str]] = {}
    for key, result in results.items():
        problems = contract_problems(result)
        if problems:
            contract_bad[key] = problems
        gaps, missing = coverage_gaps(contexts[key], result)
        if gaps:
            stated[key] = gaps
        if missing:
            silent[key] = missing
    contract_md = md.md_table(
        ["job", "problem"],
        [[k, p] for k, ps in sorted(contract_bad.items()) for p in ps][: md.MAX_ROWS],
    )
    gap_rows = [[k, ", ".join(n), "stated"] for k, n in sorted(stated.items())] + [
        [k, ", ".join(n), "NOT stated"] for k, n in sorted(silent.items())
    ]
    gaps_md = md.md_table(["job", "nodes", "gap"], gap_rows[: md.MAX_ROWS])
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
                **({"gaps": MetadataValue.md(gaps_md)} if gap_rows else {}),
            },
        ),
    ]

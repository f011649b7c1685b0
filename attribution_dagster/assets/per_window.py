"""The fleet path: jobs attributed by (cluster x time window), not one partition per job.

    finished_jobs -> window_attributions

A partition is one cluster's hour or day (`fleet.window`), whatever its job count: a week
of a cluster is 7 (daily) or 168 (hourly) partitions. Per-job rows live in the warehouse
(sinks/sql.py), not in Dagster's event log, in the same result tables as the per-job path,
so both paths are interchangeable and idempotent. Backfilling past weeks is an ordinary
Dagster backfill over these partitions (UI, or `attribution backfill`).

The cluster dimension is a static list read from the configuration (`clusters:`). Adding a
cluster adds a row of partitions on the next code-location reload; its past windows are
then missing and a backfill fills them. Without configured clusters the dimension has one
key, `default`, whose windows fail with "no scheduler configured".
"""

from collections.abc import Iterator
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetsDefinition,
    Config,
    DailyPartitionsDefinition,
    Failure,
    HourlyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    MultiPartitionsDefinition,
    StaticPartitionsDefinition,
    asset,
)
from pydantic import Field

from attribution_dagster import fleet
from attribution_dagster.assets.checks import VERDICT_CHECK, partitioned_check, verdict_evaluations
from attribution_dagster.assets.metadata import jobs_table, md_table
from attribution_dagster.connectors.clusters import Cluster
from attribution_dagster.core.config import AttributionConfig
from attribution_dagster.resources import (
    AnalysisSettingsResource,
    ClustersResource,
    FleetResource,
    SqlSinkResource,
)

GROUP = "fleet"
CLUSTER_DIM = "cluster"
WINDOW_DIM = "window"
DEFAULT_CLUSTER = "default"
WINDOW_ASSET_NAMES = ("finished_jobs", "window_attributions")


class WindowRunConfig(Config):
    """Run config of `window_attributions` (launchpad, or `attribution backfill --redo`)."""

    redo: bool = Field(
        default=False,
        description="attribute every job of the window again, even those that already have "
        "a result under the current rules version",
    )


def _cluster(clusters: ClustersResource, name: str) -> Cluster:
    """The configured cluster, or an empty one whose scheduler says it is not configured."""
    return clusters.client().get(name) or Cluster(name)


def cluster_names(config: AttributionConfig) -> list[str]:
    return sorted(config.clusters) or [DEFAULT_CLUSTER]


def window_partitions(config: AttributionConfig) -> MultiPartitionsDefinition:
    """cluster (static, from the config) x window (daily or hourly from `fleet.start`).

    The current window is a partition too (`end_offset=1`): `backfill --direct` attributes
    the jobs that already ended in it, so the Dagster path must be able to as well."""
    f = config.fleet
    time_def = (
        HourlyPartitionsDefinition(start_date=f"{f.start}-00:00", end_offset=1)
        if f.window == "hourly"
        else DailyPartitionsDefinition(start_date=f.start, end_offset=1)
    )
    return MultiPartitionsDefinition(
        {CLUSTER_DIM: StaticPartitionsDefinition(cluster_names(config)), WINDOW_DIM: time_def}
    )


def split_key(partitions: MultiPartitionsDefinition, key: str) -> tuple[str, str]:
    """`2026-11-09|atlas` -> ("atlas", "2026-11-09")."""
    dims = partitions.get_partition_key_from_str(key).keys_by_dimension
    return dims[CLUSTER_DIM], dims[WINDOW_DIM]


def build_window_assets(config: AttributionConfig) -> list[AssetsDefinition]:
    """The two window assets over the configured clusters and window length."""
    # Long on purpose: a factory; its two nested assets are short each, and are built here
    # because their partitions come from the configuration (clusters x window length)
    partitions = window_partitions(config)

    @asset(
        partitions_def=partitions,
        group_name=GROUP,
        kinds={"python", "sql"},
        description="The jobs the cluster's scheduler says ended in the window, kept in the "
        "warehouse (attribution_jobs).",
    )
    def finished_jobs(
        context: AssetExecutionContext,
        fleet_config: FleetResource,
        clusters: ClustersResource,
        sink: SqlSinkResource,
    ) -> MaterializeResult:
        s = sink.client()
        granularity = fleet_config.window
        listed: dict[str, int] = {}
        for key in context.partition_keys:
            cluster, window = split_key(partitions, key)
            try:
                listed[key] = fleet.list_window(
                    s, _cluster(clusters, cluster), window, granularity  # type: ignore[arg-type]
                )
            except fleet.WindowError as exc:
                raise Failure(description=str(exc), allow_retries=True) from None
        return MaterializeResult(
            metadata={
                "jobs": MetadataValue.int(sum(listed.values())),
                "windows": MetadataValue.int(len(listed)),
            }
        )

    @asset(
        partitions_def=partitions,
        group_name=GROUP,
        deps=[finished_jobs],
        kinds={"python", "sql"},
        description="Every job of the window attributed (the per-job pipeline over a process "
        "pool); per-job rows in the result tables the per-job path also writes.",
        check_specs=[
            partitioned_check(
                VERDICT_CHECK,
                "window_attributions",
                partitions,
                "WARN when jobs of the window need a look: ambiguous, unattributed, or read "
                "from partial data",
            )
        ],
    )
    def window_attributions(
        context: AssetExecutionContext,
        config: WindowRunConfig,
        fleet_config: FleetResource,
        clusters: ClustersResource,
        sink: SqlSinkResource,
        analysis: AnalysisSettingsResource,
    ) -> Iterator[Any]:
        s = sink.client()
        outcomes: list[fleet.WindowOutcome] = []
        verdicts: dict[str, fleet.WindowVerdicts] = {}
        for key in context.partition_keys:
            cluster, window = split_key(partitions, key)
            out = fleet.attribute_window(
                s,
                _cluster(clusters, cluster),
                window,
                fleet_config.window,  # type: ignore[arg-type]
                settings=analysis.client(),
                workers=fleet_config.workers,
                chunk_size=fleet_config.chunk_size,
                redo=config.redo,
            )
            context.log.info(
                f"{cluster} {window}: {out.jobs} jobs, {out.attributed} attributed now, "
                f"{out.skipped} already done, {out.seconds:.1f} s"
            )
            outcomes.append(out)
            verdicts[key] = fleet.window_verdicts(s, cluster, window)
        failed = [o for o in outcomes if not o.ok]
        if failed:
            raise Failure(
                description="; ".join(o.reason for o in failed)[:2000],
                metadata=_window_metadata(outcomes),
                allow_retries=True,
            )
        meta = _window_metadata(outcomes)
        if len(verdicts) == 1:
            yield MaterializeResult(metadata={**verdict_metadata(*verdicts.values()), **meta})
        else:
            for key, v in verdicts.items():
                context.add_asset_metadata(verdict_metadata(v), partition_key=key)
            yield MaterializeResult(metadata=meta)
        yield from verdict_evaluations(
            context, {k: (_window_look(v), _window_counts(v)) for k, v in verdicts.items()}
        )

    return [finished_jobs, window_attributions]


def _window_metadata(outcomes: list[fleet.WindowOutcome]) -> dict[str, Any]:
    jobs = sum(o.jobs for o in outcomes)
    seconds = sum(o.seconds for o in outcomes)
    done = sum(o.attributed for o in outcomes)
    status: dict[str, int] = {}
    for o in outcomes:
        for k, v in o.by_status.items():
            status[k] = status.get(k, 0) + v
    meta: dict[str, Any] = {
        "jobs": MetadataValue.int(jobs),
        "attributed now": MetadataValue.int(done),
        "already done": MetadataValue.int(sum(o.skipped for o in outcomes)),
        "failed jobs": MetadataValue.int(sum(len(o.failed) + len(o.unreachable) for o in outcomes)),
        "seconds": MetadataValue.float(round(seconds, 2)),
        "jobs per second": MetadataValue.float(round(done / seconds, 1) if seconds else 0.0),
    }
    if status:
        meta["by status"] = MetadataValue.md(
            md_table(["status", "jobs"], [[k, v] for k, v in sorted(status.items())])
        )
    return meta


def verdict_metadata(v: fleet.WindowVerdicts) -> dict[str, Any]:
    """A window at a glance: how many jobs need a look, then its jobs (those first)."""
    total = sum(v.by_status.values())
    return {
        "jobs needing a look": MetadataValue.int(v.needs_a_look),
        **_window_counts(v),
        "jobs by verdict": jobs_table(v.shown),
        **({"jobs shown": f"{len(v.shown)} of {total}"} if len(v.shown) < total else {}),
    }


def _window_counts(v: fleet.WindowVerdicts) -> dict[str, Any]:
    return {
        "ambiguous": MetadataValue.int(v.by_status.get("ambiguous", 0)),
        "unattributed": MetadataValue.int(v.by_status.get("unattributed", 0)),
        "attributed": MetadataValue.int(v.by_status.get("attributed", 0)),
        "with partial data": MetadataValue.int(v.partial),
    }


def _window_look(v: fleet.WindowVerdicts) -> list[str]:
    why = [f"{v.by_status[s]} {s}" for s in ("ambiguous", "unattributed") if v.by_status.get(s)]
    if v.partial:
        why.append(f"{v.partial} read from partial data")
    return why

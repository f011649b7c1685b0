"""The per-cluster `topology` assets (issue 23): each configured cluster's topology
snapshots, re-read on a schedule (daily by default), so the lineage of a verdict shows
which topology it was read against. Wiring only: pipeline.cluster_topology reads the
sources (connectors/topology); the value (ClusterTopology) is kept in the asset store under
`topology` / `<cluster>`, and raw_evidence reads the snapshot in force at each job's start.
"""

import re
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    DefaultScheduleStatus,
    Failure,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    asset,
    define_asset_job,
)

from attribution_dagster import pipeline
from attribution_dagster.assets import metadata as md
from attribution_dagster.connectors.topology.source import ClusterTopology
from attribution_dagster.core.config import AttributionConfig
from attribution_dagster.resources import AssetStoreResource, ClustersResource

GROUP = "topology"
STORE_ASSET = "topology"  # the asset store's name for every cluster's value
REFRESH_JOB = "topology_refresh_job"


def safe_name(cluster: str) -> str:
    """`h100-east` -> `h100_east` (sensors/names.py does the same for sensor names)."""
    return re.sub(r"[^A-Za-z0-9_]", "_", cluster)


def topology_clusters(config: AttributionConfig) -> list[str]:
    return sorted(name for name, c in config.clusters.items() if c.topology)


def topology_key(cluster: str) -> AssetKey:
    return AssetKey([GROUP, safe_name(cluster)])


def build_topology_assets(config: AttributionConfig) -> list[AssetsDefinition]:
    """One asset per cluster with a `topology:` block (none when no cluster has one)."""
    return [_topology_asset(name) for name in topology_clusters(config)]


def _topology_asset(cluster: str) -> AssetsDefinition:
    @asset(
        key=topology_key(cluster),
        group_name=GROUP,
        description=f"Cluster {cluster}'s fabric topology: every configured topology source "
        "(files with dated snapshots, scontrol show topology, node labels) with the time each "
        "snapshot was taken. Each job is read against the snapshot in force when it ran.",
        kinds={"python"},
    )
    def _topology(
        context: AssetExecutionContext, store: AssetStoreResource, clusters: ClustersResource
    ) -> MaterializeResult:
        c = clusters.client().get(cluster)
        value = pipeline.cluster_topology(c) if c is not None else None
        if value is None:
            raise Failure(description=f"cluster {cluster!r} has no topology configured")
        store.client().put(STORE_ASSET, {cluster: value.model_dump_json()})
        if all(s.error is not None for s in value.sources):
            raise Failure(
                description="; ".join(f"{s.source}: {s.error}" for s in value.sources),
                allow_retries=True,
            )
        return MaterializeResult(metadata=snapshots_metadata(value))

    return _topology


def snapshots_metadata(value: ClusterTopology) -> dict[str, Any]:
    rows = []
    for src in value.sources:
        if src.error is not None:
            rows.append([src.source, "-", "failed", src.error])
            continue
        for snap in src.snapshots.snapshots:
            rows.append(
                [
                    src.source,
                    snap.taken_at.isoformat() if snap.taken_at else "unknown",
                    f"{len(snap.switches)} switches, {len(snap.cables)} cables, "
                    f"{len(snap.all_nodes)} nodes",
                    "; ".join(snap.errors[:3]) or ", ".join(snap.sources[:3]),
                ]
            )
    latest = value.at(None)
    return {
        "read at": value.read_at.isoformat(),
        "snapshots": MetadataValue.int(
            sum(len(s.snapshots.snapshots) for s in value.sources if s.error is None)
        ),
        "sources": MetadataValue.md(
            md.md_table(["source", "taken at", "what", "errors / files"], rows[: md.MAX_ROWS])
        ),
        **{f"latest {k}": v for k, v in md.topology_metadata(latest).items()},
    }


def stored_topology(store: Any, cluster: str | None) -> ClusterTopology | None:
    """The cluster's topology asset value, if it was materialized."""
    if not cluster:
        return None
    got = store.get(STORE_ASSET, [cluster]).get(cluster)
    if got is None or not got.ok:
        return None
    return ClusterTopology.model_validate_json(got.payload or "")


def build_topology_schedule(
    assets: list[AssetsDefinition], cron: str = "0 5 * * *", running: bool = True
) -> ScheduleDefinition | None:
    """Re-read every cluster's topology on `cron` (daily by default); None without assets."""
    if not assets:
        return None
    job = define_asset_job(
        REFRESH_JOB, selection=assets, description="Re-read every cluster's topology."
    )
    return ScheduleDefinition(
        name="topology_refresh_schedule",
        job=job,
        cron_schedule=cron,
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED,
        description="Re-read every cluster's topology snapshots (files, scontrol, node labels).",
    )

"""The per-cluster `topology` asset through Dagster: it stores every source's snapshots
with their times, raw_evidence depends on it and reads the snapshot in force at the job's
start from the stored value, and the materializations name that snapshot (lineage)."""

from __future__ import annotations

import shutil
from pathlib import Path

from dagster import AssetKey, AssetRecordsFilter, materialize
from dagster_cases import write_case

from attribution_dagster.assets import build_job_assets
from attribution_dagster.assets.topology import build_topology_assets, topology_key
from attribution_dagster.core.config import AttributionConfig, ClusterConfig, SinkConfig
from attribution_dagster.definitions import build_definitions, build_resources
from attribution_dagster.resources.value_store import AssetValueStore


def _meta(instance, key: AssetKey, partition: str | None = None) -> dict:
    records = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    assert records, f"{key} was not materialized"
    return {k: v.value for k, v in records[0].asset_materialization.metadata.items()}


def _setup(tmp_path: Path) -> tuple[AttributionConfig, Path, Path]:
    root = tmp_path / "cases"
    root.mkdir()
    snaps = tmp_path / "snapshots"
    for day, leaf in (("2026-10-01", "old-leaf"), ("2026-11-01", "leaf-7")):
        (snaps / day).mkdir(parents=True)
        (snaps / day / "topology.conf").write_text(
            f"SwitchName={leaf} Nodes=node-a,node-b\nSwitchName=spine-1 Switches={leaf}\n"
        )
    config = AttributionConfig(
        case_root=str(root),
        sink=SinkConfig(url=f"sqlite:///{tmp_path}/results.db"),
        clusters={
            "c1": ClusterConfig.model_validate(
                {"topology": [{"kind": "files", "snapshots": str(snaps)}]}
            )
        },
    )
    return config, root, snaps


def test_topology_asset_feeds_the_job_the_snapshot_in_force(instance, tmp_path: Path) -> None:
    config, root, snaps = _setup(tmp_path)
    resources = build_resources(config)
    topo_assets = build_topology_assets(config)
    assert [a.key for a in topo_assets] == [AssetKey(["topology", "c1"])]
    assert materialize(topo_assets, instance=instance, resources=resources).success
    meta = _meta(instance, topology_key("c1"))
    assert meta["snapshots"] == 2
    assert meta["latest topology taken at"] == "2026-11-01T00:00:00+00:00"
    assert "2026-10-01T00:00:00+00:00" in meta["sources"]

    # the job reads the stored snapshots: the files may be gone by now
    shutil.rmtree(snaps)
    case = write_case(root, "xid", job_id="100", nodes=("node-a", "node-b"))
    AssetValueStore(config.sink.url).index_cases({"c1.100": str(case)})
    instance.add_dynamic_partitions("jobs", ["c1.100"])
    job_assets = build_job_assets(topology_deps=[a.key for a in topo_assets])
    result = materialize(
        [*job_assets, *topo_assets],
        selection=[a.key for a in job_assets],
        instance=instance,
        partition_key="c1.100",
        resources=resources,
    )
    assert result.success
    for asset in ("raw_evidence", "attribution"):
        m = _meta(instance, AssetKey(asset), "c1.100")
        assert m["topology taken at"] == "2026-11-01T00:00:00+00:00"  # in force on 11-02
        assert "snapshots/2026-11-01/topology.conf" in m["topology sources"]
    ev = _meta(instance, AssetKey("raw_evidence"), "c1.100")
    assert "topology:files" in ev["coverage"]


def test_definitions_wire_the_topology_lineage_and_refresh(tmp_path: Path) -> None:
    config, _, _ = _setup(tmp_path)
    defs = build_definitions(config)
    graph = defs.resolve_asset_graph()
    assert AssetKey(["topology", "c1"]) in graph.get(AssetKey("raw_evidence")).parent_keys
    schedule = defs.resolve_schedule_def("topology_refresh_schedule")
    assert schedule.cron_schedule == "0 5 * * *"
    # no cluster with a topology: no topology asset, no refresh schedule
    bare = build_definitions(config.model_copy(update={"clusters": {}}))
    assert not any(k.path[0] == "topology" for k in bare.resolve_asset_graph().get_all_asset_keys())
    assert "topology_refresh_schedule" not in {s.name for s in bare.schedules or []}

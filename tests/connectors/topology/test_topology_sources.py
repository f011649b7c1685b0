"""The `topology` role: configuration, the files source with dated snapshots, the live
sources (`scontrol show topology` through the Slurm connector's runner, node labels through
the Kubernetes API client) and pipeline.collect_topology.

The Kubernetes API cannot run here: its answers are recorded real shapes (a v1 NodeList
served by tests/fakes/fake_k8s.py on the REST paths the official client calls). The live
`scontrol` against a real slurmctld is in tests/connectors/slurm/test_slurm_live.py."""

from __future__ import annotations

import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from fake_k8s import FakeKubeAPI, status

from attribution_dagster import pipeline
from attribution_dagster.connectors.base import SourceError
from attribution_dagster.connectors.clusters import Cluster, check_clusters
from attribution_dagster.connectors.slurm.sacct import RunResult
from attribution_dagster.connectors.topology.files import TopologyFilesConfig
from attribution_dagster.connectors.topology.live import (
    KubeLabelsTopologyConfig,
    ScontrolTopologyConfig,
    ScontrolTopologySource,
)
from attribution_dagster.connectors.topology.source import read_cluster_topology
from attribution_dagster.core.config import ClusterConfig, ConfigError
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.formats.topology import read_nodes_json, read_topology_dir
from attribution_dagster.core.topology import Topology, TopologySnapshots

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"
UTC = timezone.utc

SCONTROL = (  # Slurm's own output shape (TOPOLOGY-FACTS s3), the CI cluster's names
    "SwitchName=leaf-1 Level=0 LinkSpeed=1 Nodes=node-a,node-b\n"
    "SwitchName=leaf-2 Level=0 LinkSpeed=1 Nodes=node-c\n"
    "SwitchName=spine-1 Level=1 LinkSpeed=1 Nodes=node-a,node-b,node-c Switches=leaf-[1-2]\n"
)


def _ctx(
    start: datetime,
    cluster: str = "atlas",
    case_dir: str | None = None,
    nodes: tuple[str, ...] = ("gpu-a01", "gpu-a02"),
) -> ExecutionContext:
    return ExecutionContext.model_validate(
        {
            "job_id": "4412",
            "cluster": cluster,
            "scheduler": "slurm",
            "nodes": list(nodes),
            "start": start.isoformat(),
            "end": (start + timedelta(hours=1)).isoformat(),
            "state": "FAILED",
            "case_dir": case_dir,
        }
    )


def _snapshot_dir(root: Path, name: str, conf: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "topology.conf").write_text(conf)


# --------------------------------------------------------------------------- configuration


def test_a_cluster_configures_topology_like_logs_and_metrics(tmp_path: Path) -> None:
    cfg = ClusterConfig.model_validate(
        {
            "topology": [
                {"kind": "files", "paths": [str(tmp_path)], "snapshots": str(tmp_path)},
                {"kind": "slurm_scontrol", "slurm_conf": "/etc/slurm/slurm.conf"},
                {"kind": "kubernetes_labels", "api_url": "http://127.0.0.1:1"},
            ]
        }
    )
    cluster = Cluster("atlas", cfg)
    names = [s.name for s in cluster.sources.topology]
    assert names == ["files", "slurm_scontrol", "kubernetes_labels"]
    assert not cluster.sources  # topology alone is no log or metric evidence


@pytest.mark.parametrize(
    ("block", "error"),
    [
        ({"kind": "ufm"}, "clusters.atlas.topology[0]: unknown topology kind 'ufm'"),
        ({"kind": "files"}, "needs 'paths' or 'snapshots'"),
        ({"kind": "slurm_scontrol", "scontol": "x"}, "key 'scontol'"),
        ({"paths": []}, "needs 'kind'"),
    ],
)
def test_bad_topology_blocks_name_the_cluster_and_key(block: dict, error: str) -> None:
    with pytest.raises((ConfigError, ValueError)) as exc:
        check_clusters({"atlas": ClusterConfig.model_validate({"topology": [block]})})
    assert error in str(exc.value)


def test_two_topology_sources_of_one_kind_need_names(tmp_path: Path) -> None:
    two = [{"kind": "files", "paths": ["/a"]}, {"kind": "files", "paths": ["/b"]}]
    with pytest.raises(ValueError, match="share the name 'files'"):
        ClusterConfig.model_validate({"topology": two})
    two[1]["name"] = "ufm"
    assert ClusterConfig.model_validate({"topology": two}).topology[1].source_name == "files:ufm"


# --------------------------------------------------------------------------- snapshots


def test_snapshot_at_picks_the_one_in_force_when_the_job_ran() -> None:
    t = [datetime(2026, 11, d, tzinfo=UTC) for d in (1, 8, 15)]
    snaps = TopologySnapshots(snapshots=[Topology(taken_at=x, sources=[str(x.day)]) for x in t])
    at = snaps.snapshot_at
    assert at(datetime(2026, 11, 9, tzinfo=UTC)).sources == ["8"]
    assert at(datetime(2026, 11, 8, tzinfo=UTC)).sources == ["8"]  # taken at the start: in force
    assert at(datetime(2026, 10, 1, tzinfo=UTC)).sources == ["1"]  # older than all: the earliest
    assert at(datetime(2027, 1, 1, tzinfo=UTC)).sources == ["15"]
    assert at(datetime(2026, 11, 9)).sources == ["8"]  # a naive time is UTC
    assert at(None).sources == ["15"]
    assert TopologySnapshots().snapshot_at(t[0]) is None


def test_files_source_keeps_dated_snapshots_and_the_current_files(tmp_path: Path) -> None:
    snaps = tmp_path / "snapshots"
    _snapshot_dir(snaps, "2026-11-01", "SwitchName=leaf-1 Nodes=gpu-a0[1-2]\n")
    _snapshot_dir(snaps, "2026-11-15T06:00", "SwitchName=leaf-9 Nodes=gpu-a0[1-2]\n")
    (snaps / "2026-11-20").mkdir()  # empty: an error, not a snapshot
    current = tmp_path / "current"
    current.mkdir()
    shutil.copy(DATA / "ibnetdiscover.txt", current / "ibnetdiscover.txt")
    src = TopologyFilesConfig(paths=[str(current)], snapshots=str(snaps)).client("atlas")
    got = src.snapshots()
    assert [s.taken_at for s in got.snapshots] == [
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 11, 1, 6, 0, 2, tzinfo=UTC),  # the ibnetdiscover header's time
        datetime(2026, 11, 15, 6, 0, tzinfo=UTC),
    ]
    assert any("2026-11-20: holds no topology file" in e for e in got.errors)
    assert got.snapshot_at(datetime(2026, 11, 10, tzinfo=UTC)).cables  # ibnetdiscover's
    assert got.snapshot_at(datetime(2026, 11, 16, tzinfo=UTC)).leaf("gpu-a01") == "leaf-9"


def test_files_source_with_nothing_readable_raises(tmp_path: Path) -> None:
    src = TopologyFilesConfig(paths=[str(tmp_path / "missing.conf")]).client("atlas")
    with pytest.raises(SourceError, match="missing.conf: not found"):
        src.snapshots()


def test_read_topology_dir_merges_every_form_and_dates_it(tmp_path: Path) -> None:
    topo = tmp_path / "topology"
    (topo / "lldp").mkdir(parents=True)
    shutil.copy(DATA / "ibnetdiscover.txt", topo / "ibnetdiscover.txt")
    (topo / "topology.conf").write_text(
        "SwitchName=ib-leaf-01 Nodes=gpu-a0[1-2]\nSwitchName=ib-spine-01 Switches=ib-leaf-01\n"
    )
    (topo / "lldp" / "gpu-r01.json").write_text(
        '{"lldp": {"interface": {"eth0": {"chassis": {"leaf01": {}}, '
        '"port": {"id": {"type": "ifname", "value": "swp3"}}}}}}'
    )
    (topo / "nodes.json").write_text("{broken")
    t = read_topology_dir(topo, label="topology")
    assert t is not None
    assert t.sources == [
        "topology/ibnetdiscover.txt",
        "topology/topology.conf",
        "topology/nodes.json",
        "topology/lldp/gpu-r01.json",
    ]
    assert t.taken_at == datetime(
        2026, 11, 1, 6, 0, 2, tzinfo=UTC
    )  # a header beats copied files' mtimes
    assert t.leaf_of["gpu-a01"] == "ib-leaf-01" and t.cable_at("ib-leaf-01", "9").node == "gpu-a02"
    assert t.switches["ib-leaf-01"].guid == "0x2c5eab036832a42e"  # ibnetdiscover's, merged
    assert t.cables_of("gpu-r01")[0].switch_port == "swp3"
    assert t.errors and "topology/nodes.json: not JSON" in t.errors[0]
    assert read_topology_dir(tmp_path / "none") is None


def test_read_topology_dir_dates_from_mtime_without_a_header(tmp_path: Path) -> None:
    conf = tmp_path / "topology.conf"
    conf.write_text("SwitchName=s0 Nodes=n[1-2]\n")
    os.utime(conf, (1_790_000_000, 1_790_000_000))
    t = read_topology_dir(tmp_path)
    assert t is not None and t.taken_at == datetime.fromtimestamp(1_790_000_000, tz=UTC)


# --------------------------------------------------------------------------- live: scontrol


def test_scontrol_source_runs_scontrol_show_topology_and_reads_it() -> None:
    calls = []

    def runner(argv, env, timeout):  # the Slurm connector's runner protocol
        calls.append((list(argv), env.get("SLURM_CONF")))
        return RunResult(0, SCONTROL, "")

    src = ScontrolTopologySource(
        ScontrolTopologyConfig(slurm_conf="/etc/slurm/slurm.conf"), "atlas", runner=runner
    )
    got = src.snapshots().snapshots[0]
    assert calls == [(["scontrol", "show", "topology"], "/etc/slurm/slurm.conf")]
    assert got.leaf("node-b") == "leaf-1" and got.leaf("node-c") == "leaf-2"
    assert got.parent("leaf-2") == "spine-1" and got.taken_at is not None


@pytest.mark.parametrize(
    ("result", "error"),
    [
        (RunResult(1, "", "scontrol: error: Unable to contact slurm controller (connect failure)"),
         "cannot reach slurmctld"),
        (RunResult(0, "", ""), "scontrol show topology: no topology"),
    ],
)  # fmt: skip
def test_scontrol_source_failures_are_one_line_errors(result: RunResult, error: str) -> None:
    src = ScontrolTopologySource(ScontrolTopologyConfig(), "atlas", runner=lambda *a: result)
    with pytest.raises(SourceError, match=error):
        src.snapshots()


# --------------------------------------------------------------------------- live: Kubernetes


def test_kubernetes_labels_read_through_the_api_equal_the_file(fake_http) -> None:  # noqa: ANN001
    """Recorded NodeList shape served on /api/v1/nodes; paged (limit/continue) by the client."""
    api = FakeKubeAPI(fake_http).load("nodes-topograph.json")
    src = KubeLabelsTopologyConfig(api_url=api.url).client("atlas")
    live = src.snapshots().snapshots[0]
    from_file = read_nodes_json((DATA / "nodes.json").read_text())
    assert live.leaf_of == from_file.leaf_of and live.switches == from_file.switches
    assert live.nvlink_domain_of == from_file.nvlink_domain_of and live.errors == []
    assert live.sources == ["kubernetes: nodes"]


def test_kubernetes_labels_forbidden_is_a_source_error(fake_http) -> None:  # noqa: ANN001
    api = FakeKubeAPI(fake_http).load("nodes-topograph.json")
    api.fail(
        "/api/v1/nodes",
        403,
        status(403, "Forbidden", 'nodes is forbidden: User "system:serviceaccount:x:y" cannot '
               'list resource "nodes" in API group "" at the cluster scope'),
    )  # fmt: skip
    src = KubeLabelsTopologyConfig(api_url=api.url).client("atlas")
    with pytest.raises(SourceError, match="list nodes: 403 nodes is forbidden") as exc:
        src.snapshots()
    assert not exc.value.transient


# --------------------------------------------------------------------------- the pipeline


def test_collect_topology_case_directory_wins(tmp_path: Path) -> None:
    (tmp_path / "topology").mkdir()
    shutil.copy(DATA / "ibnetdiscover.txt", tmp_path / "topology" / "ibnetdiscover.txt")
    other = tmp_path / "other"
    other.mkdir()
    (other / "topology.conf").write_text("SwitchName=elsewhere Nodes=gpu-a01\n")
    cluster = Cluster(
        "atlas",
        ClusterConfig.model_validate({"topology": [{"kind": "files", "paths": [str(other)]}]}),
    )
    cov: list = []
    topo = pipeline.collect_topology(
        tmp_path, _ctx(datetime(2026, 11, 2, tzinfo=UTC)), cluster.sources, cov
    )
    assert topo is not None and topo.leaf("gpu-a01") == "ib-leaf-01"
    # the job's nodes only (gpu-a01's two cables, gpu-a02's one), every switch kept
    assert [(c.node, c.switch_port) for c in topo.cables] == [
        ("gpu-a01", "1"),
        ("gpu-a01", "2"),
        ("gpu-a02", "9"),
    ]
    assert len(topo.switches) == 3
    assert [(c.source, c.status, c.files, c.records) for c in cov] == [
        ("topology:files", "ok", 1, 3)
    ]


def test_collect_topology_from_cluster_sources_at_the_job_start(tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    _snapshot_dir(snaps, "2026-11-01", "SwitchName=old-leaf Nodes=gpu-a0[1-2]\n")
    _snapshot_dir(snaps, "2026-11-10", "SwitchName=new-leaf Nodes=gpu-a0[1-2]\n")
    cluster = Cluster(
        "atlas",
        ClusterConfig.model_validate(
            {
                "topology": [
                    {"kind": "files", "snapshots": str(snaps)},
                    {"kind": "files", "name": "gone", "paths": [str(tmp_path / "gone")]},
                ]
            }
        ),
    )
    for day, leaf in ((5, "old-leaf"), (12, "new-leaf"), (1, "old-leaf")):
        cov: list = []
        ctx = _ctx(datetime(2026, 11, day, 3, tzinfo=UTC))
        topo = pipeline.collect_topology(None, ctx, cluster.sources, cov)
        assert topo is not None and topo.leaf("gpu-a02") == leaf
        assert [(c.source, c.status) for c in cov] == [
            ("topology:files", "ok"),
            ("topology:files:gone", "failed"),
        ]
        assert "gone: not found" in cov[1].errors[0]
    # no topology source and no case topology: none, and no coverage entry
    cov = []
    assert (
        pipeline.collect_topology(tmp_path, _ctx(datetime(2026, 11, 5, tzinfo=UTC)), None, cov)
        is None
    )
    assert cov == []


def test_collect_topology_resolves_host_spellings_to_the_job(tmp_path: Path) -> None:
    """A topology that spells hosts with their domain still places the job's nodes."""
    (tmp_path / "topology").mkdir()
    (tmp_path / "topology" / "topology.conf").write_text(
        "SwitchName=l1 Nodes=gpu-a01.cluster.local,gpu-a02.cluster.local,gpu-z99.cluster.local\n"
    )
    topo = pipeline.collect_topology(tmp_path, _ctx(datetime(2026, 11, 2, tzinfo=UTC)))
    assert topo is not None
    assert sorted(topo.leaf_of) == ["gpu-a01.cluster.local", "gpu-a02.cluster.local"]


def test_collect_evidence_carries_the_topology(tmp_path: Path) -> None:
    case = tmp_path / "case"
    (case / "logs" / "gpu-a01").mkdir(parents=True)
    (case / "logs" / "gpu-a01" / "kern.log").write_text("2026-11-02T10:00:00Z gpu-a01 kernel: hi\n")
    (case / "topology").mkdir()
    (case / "topology" / "topology.conf").write_text("SwitchName=l1 Nodes=gpu-a0[1-2]\nbad line\n")
    ctx = _ctx(datetime(2026, 11, 2, 9, tzinfo=UTC), case_dir=str(case))
    raw = pipeline.collect_evidence(None, ctx)
    assert raw.topology is not None and raw.topology.leaf_of == {"gpu-a01": "l1", "gpu-a02": "l1"}
    cov = next(c for c in raw.coverage if c.source == "topology:files")
    assert (
        cov.status == "partial"
        and "topology/topology.conf:2: not a Key=Value line" in cov.errors[0]
    )


def test_cluster_topology_records_a_failing_source_and_keeps_the_others(tmp_path: Path) -> None:
    (tmp_path / "topology.conf").write_text("SwitchName=s0 Nodes=gpu-a01\n")
    good = TopologyFilesConfig(paths=[str(tmp_path / "topology.conf")]).client("atlas")
    bad = ScontrolTopologySource(ScontrolTopologyConfig(scontrol="/nonexistent/scontrol"), "atlas")
    value = read_cluster_topology("atlas", [good, bad])
    assert value.sources[0].error is None
    assert "scontrol not found" in (value.sources[1].error or "")
    assert value.at(datetime(2026, 11, 1, tzinfo=UTC)).leaf("gpu-a01") == "s0"
    again = type(value).model_validate_json(value.model_dump_json())
    assert [s.name for s in again.as_sources()] == ["files", "slurm_scontrol"]
    with pytest.raises(SourceError):
        again.as_sources()[1].snapshots()


def test_a_cluster_reads_its_topology_once_for_many_jobs(tmp_path: Path) -> None:
    """The CLI and fleet paths ask per job; the cluster's sources keep a read for a while,
    and a failure is not kept."""
    calls: list[str] = []
    results = [RunResult(1, "", "scontrol: error: Socket timed out"), RunResult(0, SCONTROL, "")]

    def runner(argv, env, timeout):
        calls.append(argv[1])
        return results.pop(0) if results else RunResult(0, SCONTROL, "")

    cluster = Cluster(
        "atlas", ClusterConfig.model_validate({"topology": [{"kind": "slurm_scontrol"}]})
    )
    [cached] = cluster.sources.topology
    cached.source.client.runner = runner
    ctx = _ctx(datetime(2026, 11, 2, tzinfo=UTC), nodes=("node-a", "node-c"))
    cov: list = []
    assert pipeline.collect_topology(None, ctx, cluster.sources, cov) is None
    assert cov[0].status == "failed" and cov[0].retryable  # a timeout: transient
    for _ in range(5):
        assert pipeline.collect_topology(None, ctx, cluster.sources).leaf("node-c") == "leaf-2"
    assert len(calls) == 2

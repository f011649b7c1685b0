"""fault_domain (issue 23): switch-side lines placed through the topology, and each level of
rules.yaml `fault_domains:` fired on hand-built observations and Topology objects.

The topologies are built directly (core/topology.Topology), as the readers would fill them;
the samples (samples/topo-*) run the same rules on real-format files end to end.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.topology import Cable, Switch, Topology
from attribution_dagster.rules.engine import load_engine
from attribution_dagster.rules.engine.engine import DEFAULT_RULES
from attribution_dagster.rules.engine.rulebook import RulebookError

ENGINE = load_engine()
T0 = datetime(2026, 11, 12, 9, 0, tzinfo=timezone.utc)
NODES = ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]
COV = [SourceCoverage(source="files:logs", nodes_read=NODES)]
_n = iter(range(1, 100000))


def ctx(nodes: list[str] = NODES, gpu_model: str = "H100") -> ExecutionContext:
    return ExecutionContext(
        job_id="77",
        scheduler="slurm",
        cluster="c",
        state=JobState.FAILED,
        exit_code=1,
        start=T0,
        end=T0 + timedelta(minutes=40),
        nodes=nodes,
        gpu_model=gpu_model,
    )


def ob(kind: str, node: str, sec: float, path: str | None = None, **kw: Any) -> Observation:
    n = next(_n)
    return Observation(
        kind=kind,
        node=node,
        time=T0 + timedelta(seconds=sec),
        time_quality="exact",
        excerpt=kw.pop("excerpt", f"{kind} line {n}"),
        source="files",
        locator=FileLine(path=path or f"logs/{node}/kern.log", line=n),
        parser=kw.pop("parser", "test"),
        **kw,
    )


def topo(extra_nodes: int = 0) -> Topology:
    """Two leaves under one spine: gpu-001..004 on ib-leaf-07 (ports 1, 3, 5, 7), gpu-005..008
    on ib-leaf-08; each node's mlx5_10 is its cable."""
    cables = []
    for i in range(8):
        leaf = "ib-leaf-07" if i < 4 else "ib-leaf-08"
        cables.append(
            Cable(
                node=f"gpu-{i + 1:03d}",
                host_port="mlx5_10",
                switch=leaf,
                switch_port=str(1 + 2 * (i % 4)),
                host_port_num=1,
                host_guid=f"0xe09d7303b4f1ab{i:02x}",
            )
        )
    return Topology(
        switches={
            "ib-spine-02": Switch(name="ib-spine-02", tier=1),
            "ib-leaf-07": Switch(
                name="ib-leaf-07", tier=0, parent="ib-spine-02", guid="0xb8599f0300fc6de4"
            ),
            "ib-leaf-08": Switch(name="ib-leaf-08", tier=0, parent="ib-spine-02"),
        },
        leaf_of={f"gpu-{i + 1:03d}": ("ib-leaf-07" if i < 4 else "ib-leaf-08") for i in range(8)},
        cables=cables,
        nvlink_domain_of={
            f"gpu-{i + 1:03d}": ("nvl-r07" if i < 4 else "nvl-r08") for i in range(8)
        },
    )


def down(node: str, sec: float = 600.0) -> Observation:
    return ob("ib_link_down", node, sec, port="mlx5_10/1")


def symptoms(nodes: list[str], sec: float = 620.0) -> list[Observation]:
    return [ob("ib_completion_error", n, sec, peer="10.0.0.9", attrs={"status": 12}) for n in nodes]


def opensm(
    switch: str, port: int, sec: float = 600.0, guid: str = "0xb8599f0300fc6de4"
) -> Observation:
    return ob(
        "ib_link_down",
        CLUSTER_NODE,
        sec,
        path="logs/opensm/opensm.log",
        parser="opensm_port_down",
        attrs={
            "side": "switch",
            "origin": "opensm",
            "switch": switch,
            "switch_guid": guid,
            "switch_port": str(port),
        },
    )


def run(
    obs: list[Observation],
    topology: Topology | None,
    c: ExecutionContext | None = None,
    engine=ENGINE,
):
    return engine.attribute(c or ctx(), obs, COV, topology=topology)


# ---------------------------------------------------------------- levels
def test_one_host_port_down_is_a_link_with_both_ends():
    r = run([down("gpu-003"), *symptoms(["gpu-001", "gpu-002", "gpu-004"])], topo())
    assert (r.status, r.category, r.suspect_nodes) == ("attributed", "network.fabric", ["gpu-003"])
    fd = r.fault_domain
    assert fd is not None and (fd.level, fd.name, fd.nodes) == ("link", "ib-leaf-07", ["gpu-003"])
    assert [(p.node, p.host_port, p.switch, p.switch_port) for p in fd.ports] == [
        ("gpu-003", "mlx5_10", "ib-leaf-07", "5")
    ]
    assert fd.describe() == "link ib-leaf-07 port 5 (gpu-003 mlx5_10)"


def test_every_job_node_under_a_leaf_hit_together_names_the_leaf():
    r = run([down(n, 600 + i * 0.2) for i, n in enumerate(NODES)], topo())
    fd = r.fault_domain
    assert fd is not None and (fd.level, fd.name) == ("leaf", "ib-leaf-07")
    assert fd.nodes == NODES and [p.switch_port for p in fd.ports] == ["1", "3", "5", "7"]
    assert fd.describe() == "leaf ib-leaf-07 ports 1, 3, 5, 7 (gpu-001, gpu-002, gpu-003, gpu-004)"


def test_a_leaf_whose_other_job_nodes_were_fine_is_not_named():
    """Two cables of ib-leaf-07 down, its other two job nodes fine: the cables explain it."""
    r = run([down("gpu-001"), down("gpu-002", 600.5), *symptoms(["gpu-003", "gpu-004"])], topo())
    fd = r.fault_domain
    assert fd is not None and fd.level == "link" and fd.name == "ib-leaf-07"
    assert {(p.node, p.switch_port) for p in fd.ports} == {("gpu-001", "1"), ("gpu-002", "3")}


def test_the_fabric_naming_the_switch_itself_names_the_leaf():
    """The same two cables, plus OpenSM reporting the leaf's uplink port (no host on it)."""
    obs = [
        down("gpu-001"),
        down("gpu-002", 600.5),
        opensm("ib-leaf-07", 63),
        *symptoms(["gpu-003"]),
    ]
    fd = run(obs, topo()).fault_domain
    assert fd is not None and (fd.level, fd.name) == ("leaf", "ib-leaf-07")


def test_nodes_under_two_leaves_of_one_spine_hit_together_name_the_spine():
    nodes = [f"gpu-{i:03d}" for i in range(1, 9)]
    r = run([down(n, 600 + i * 0.1) for i, n in enumerate(nodes)], topo(), ctx(nodes))
    fd = r.fault_domain
    assert fd is not None and (fd.level, fd.name, fd.nodes) == ("spine", "ib-spine-02", nodes)
    assert len(fd.ports) == 8


def test_transport_errors_alone_are_placed_only_by_what_the_fabric_says():
    nodes = [f"gpu-{i:03d}" for i in range(1, 9)]
    quiet = run(symptoms(nodes), topo(), ctx(nodes))
    assert quiet.category == "network.fabric" and quiet.fault_domain is None
    uplinks = [opensm("ib-leaf-07", 63), opensm("ib-leaf-08", 63, guid="0x1")]
    fd = run(symptoms(nodes) + uplinks, topo(), ctx(nodes)).fault_domain
    assert fd is not None and (fd.level, fd.name) == ("spine", "ib-spine-02")


def test_nvlink_faults_on_several_trays_with_fabric_manager_name_the_domain():
    obs = [
        ob(
            "xid",
            n,
            600 + i * 0.04,
            code=149,
            pci="0008:01:00",
            port="link 5",
            attrs={"fatal": True, "mnemonic": "NVLINK_NETIR_ERROR"},
        )
        for i, n in enumerate(NODES[:3])
    ]
    fm = ob(
        "nvlink_error",
        CLUSTER_NODE,
        600.4,
        path="logs/fm/fabricmanager.log",
        attrs={"side": "switch", "origin": "fabricmanager", "module": 3},
    )
    c = ctx(gpu_model="GB200")
    without = run(obs, topo(), c)
    assert without.category == "gpu.nvlink" and without.fault_domain is None  # no FM / IMEX line
    fd = run([*obs, fm], topo(), c).fault_domain
    assert fd is not None and (fd.level, fd.name, fd.nodes) == (
        "nvlink_domain",
        "nvl-r07",
        NODES[:3],
    )
    one = run([obs[0], fm], topo(), c).fault_domain
    assert one is None  # one tray is not the domain


# ---------------------------------------------------------------- never invented
def test_no_topology_or_a_non_network_cause_gives_no_fault_domain():
    obs = [down("gpu-003"), *symptoms(["gpu-001"])]
    assert run(obs, None).fault_domain is None
    assert run(obs, Topology()).fault_domain is None
    lost = [ob("xid", "gpu-002", 600, code=79, pci="0000:9a:00"), *symptoms(["gpu-001"])]
    r = run(lost, topo())
    assert r.category == "gpu.lost" and r.fault_domain is None
    both = run([*lost, down("gpu-003", 601)], topo())  # GPU or network: not decided, not placed
    assert both.status == "ambiguous" and both.fault_domain is None


def test_a_node_outside_the_topology_gives_no_fault_domain():
    t = topo()
    t2 = Topology(
        switches=t.switches,
        cables=[c for c in t.cables if c.node != "gpu-003"],
        leaf_of={k: v for k, v in t.leaf_of.items() if k != "gpu-003"},
    )
    assert run([down("gpu-003"), *symptoms(["gpu-001"])], t2).fault_domain is None


# ---------------------------------------------------------------- switch-side placement
def test_a_switch_port_line_is_evidence_about_the_node_cabled_there():
    """OpenSM names ib-leaf-07 port 5 (by GUID too): gpu-003's own logs say nothing."""
    r = run([opensm("ib-leaf-07", 5), *symptoms(["gpu-001", "gpu-002", "gpu-004"])], topo())
    assert (r.status, r.suspect_nodes) == ("attributed", ["gpu-003"])
    assert r.fault_domain is not None and r.fault_domain.ports[0].switch_port == "5"
    cause = [lk for lk in r.symptom_chain if lk.role == "root_cause"]
    assert cause and cause[0].evidence.locator.startswith("logs/opensm/opensm.log")
    by_guid = ob(
        "ib_link_down",
        CLUSTER_NODE,
        600,
        path="logs/ufm/event.log",
        attrs={"side": "switch", "origin": "ufm", "host_guid": "e09d7303b4f1ab01", "host": "x"},
    )
    assert run([by_guid, *symptoms(["gpu-001"])], topo()).suspect_nodes == ["gpu-002"]


def test_without_a_topology_switch_side_lines_stay_context():
    r = run([opensm("ib-leaf-07", 5), *symptoms(["gpu-001", "gpu-002"])], None)
    assert r.suspect_nodes == [] and r.fault_domain is None
    assert any("switch-side line(s) are context only (no topology" in n for n in r.notes)
    # a port that leads to no job node (an uplink) is context too
    r2 = run([opensm("ib-leaf-07", 63), *symptoms(["gpu-001", "gpu-002"])], topo())
    assert r2.suspect_nodes == []
    assert any("their ports lead to no job node" in n for n in r2.notes)


def test_a_cumulus_line_without_a_host_takes_the_switch_from_its_directory():
    t = Topology(
        cables=[
            Cable(
                node="gpu-002",
                host_port="ens1f1np1",
                switch="roce-leaf-02",
                switch_port="swp3",
                fabric="ethernet",
            )
        ],
        switches={"roce-leaf-02": Switch(name="roce-leaf-02")},
    )
    line = ob(
        "ib_link_down",
        CLUSTER_NODE,
        600,
        path="logs/roce-leaf-02/syslog",
        attrs={"side": "switch", "origin": "cumulus", "switch_port": "swp3"},
    )
    r = run([line, *symptoms(["gpu-001"])], t)
    assert r.suspect_nodes == ["gpu-002"]
    assert r.fault_domain is not None and r.fault_domain.describe() == (
        "link roce-leaf-02 port swp3 (gpu-002 ens1f1np1)"
    )


# ---------------------------------------------------------------- thresholds are data
def _engine_with(tmp_path: Path, **domains: Any):
    data = yaml.safe_load(DEFAULT_RULES.read_text())
    data["fault_domains"] = {**data["fault_domains"], **domains}
    p = tmp_path / "rules.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_engine(p)


def test_an_operator_can_lower_the_leaf_share(tmp_path):
    eng = _engine_with(tmp_path, leaf={"min_nodes": 2, "min_share": 0.5, "switch_evidence": True})
    obs = [down("gpu-001"), down("gpu-002", 600.5), *symptoms(["gpu-003", "gpu-004"])]
    fd = run(obs, topo(), engine=eng).fault_domain
    assert fd is not None and (fd.level, fd.name) == ("leaf", "ib-leaf-07")


def test_an_operator_can_turn_a_category_off_and_bad_values_are_named(tmp_path):
    eng = _engine_with(tmp_path, categories={"gpu.nvlink": "nvlink"})
    assert run([down("gpu-003"), *symptoms(["gpu-001"])], topo(), engine=eng).fault_domain is None
    with pytest.raises(RulebookError, match="fault_domains field 'leaf.min_share'"):
        _engine_with(tmp_path, leaf={"min_share": 3})


def test_a_fat_tree_names_a_spine_only_when_the_fabric_says_which():
    """Leaves under two spines each (`uplinks`, no single parent): hosts alone cannot tell
    which spine; a UFM link-down between a leaf and ib-spine-01 can."""
    t = topo()
    for leaf in ("ib-leaf-07", "ib-leaf-08"):
        t.switches[leaf] = t.switches[leaf].model_copy(
            update={"parent": None, "uplinks": ["ib-spine-01", "ib-spine-02"]}
        )
    t.switches["ib-spine-01"] = Switch(name="ib-spine-01", tier=1)
    nodes = [f"gpu-{i:03d}" for i in range(1, 9)]
    obs = [down(n, 600 + i * 0.1) for i, n in enumerate(nodes)]
    assert run(obs, t, ctx(nodes)).fault_domain is None
    ufm = ob(
        "ib_link_down",
        CLUSTER_NODE,
        600.2,
        path="logs/ufm/event.log",
        parser="ufm_link_down",
        attrs={
            "side": "switch",
            "origin": "ufm",
            "switch": "ib-leaf-07",
            "switch_port": "63",
            "peer_switch": "ib-spine-01",
            "peer_switch_port": "7",
        },
    )
    fd = run([*obs, ufm], t, ctx(nodes)).fault_domain
    assert fd is not None and (fd.level, fd.name) == ("spine", "ib-spine-01")


def test_every_cable_of_a_node_is_listed():
    t = topo()
    t.cables.append(
        Cable(node="gpu-003", host_port="mlx5_11", switch="ib-leaf-07", switch_port="6")
    )
    t = Topology.model_validate(t.model_dump())  # fresh indexes
    obs = [
        down("gpu-003"),
        ob("ib_link_down", "gpu-003", 600.3, port="mlx5_11/1"),
        *symptoms(["gpu-001"]),
    ]
    fd = run(obs, t).fault_domain
    assert fd is not None and fd.level == "link"
    assert [(p.host_port, p.switch_port) for p in fd.ports] == [("mlx5_10", "5"), ("mlx5_11", "6")]
    assert fd.describe() == "link ib-leaf-07 ports 5, 6 (gpu-003 mlx5_10, gpu-003 mlx5_11)"

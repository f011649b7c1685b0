# ruff: noqa: E501 - real-format lines are quoted verbatim
"""The topology readers on real-format input (shared/reference/TOPOLOGY-FACTS.md s1, s3-s5):
the lines quoted there verbatim, plus small fabrics written in the same shapes
(tests/data/topology/). Malformed input is a recorded error, never an exception."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from attribution_dagster.core.formats.topology import (
    read_ibnetdiscover,
    read_lldp_json,
    read_nodes_json,
    read_topology_conf,
    read_topology_yaml,
)
from attribution_dagster.core.formats.topology.ibnetdiscover import switch_name

DATA = Path(__file__).resolve().parents[2] / "data" / "topology"

# --------------------------------------------------------------------------- topology.conf

MAN_PAGE_TREE = """\
# topology.conf(5) example
SwitchName=s0 Nodes=dev[0-5]
SwitchName=s1 Nodes=dev[6-11]
SwitchName=s2 Nodes=dev[12-17]
SwitchName=s3 Switches=s[0-2]
"""


def test_topology_conf_tree_from_the_man_page() -> None:
    t = read_topology_conf(MAN_PAGE_TREE)
    assert t.errors == []
    assert t.leaf("dev0") == "s0" and t.leaf("dev11") == "s1" and t.leaf("dev17") == "s2"
    assert len(t.leaf_of) == 18
    assert {s: (t.switches[s].tier, t.switches[s].parent) for s in t.switches} == {
        "s0": (0, "s3"),
        "s1": (0, "s3"),
        "s2": (0, "s3"),
        "s3": (1, None),
    }
    assert t.nodes_under("s3") == [f"dev{i}" for i in range(18)]


def test_topology_conf_keys_are_case_insensitive_and_comments_dropped() -> None:
    text = "switchname=leaf1 nodes=gpu[001-002]   # rack 1\nSWITCHNAME=spine SWITCHES=leaf1 LinkSpeed=100\n"
    t = read_topology_conf(text)
    assert t.errors == []
    assert t.leaf_of == {"gpu001": "leaf1", "gpu002": "leaf1"}
    assert t.parent("leaf1") == "spine"


def test_topology_conf_block_plugin() -> None:
    text = "BlockName=block1 Nodes=node[1-4]\nBlockName=block2 Nodes=node[5-8]\nBlockSizes=4,8\n"
    t = read_topology_conf(text)
    assert t.errors == []
    assert t.leaf("node3") == "block1" and t.leaf("node8") == "block2"
    assert t.switches["block2"].tier == 0


def test_scontrol_show_topology_levels_pick_the_lowest_switch() -> None:
    """Real lines (Spartan, Leonardo): upper levels list Nodes= too; the leaf is Level=0."""
    text = (
        "SwitchName=sp-266-p16-1 Level=1 LinkSpeed=1 Switches=le-266-q11-1-res,le-266-q14-1-res\n"
        "SwitchName=le-266-q11-1-res Level=0 LinkSpeed=1 Nodes=spartan-bm[053-066]\n"
        "SwitchName=isw-L2-CELLG1 Level=1 LinkSpeed=1 Nodes=lrdn[0001-0180] "
        "Switches=isw1[0100,0102,0104]\n"
        "SwitchName=isw10100 Level=0 LinkSpeed=1 Nodes=lrdn[0001-0008,0013-0014]\n"
    )
    t = read_topology_conf(text, "scontrol show topology")
    assert t.errors == []
    assert t.leaf("spartan-bm053") == "le-266-q11-1-res"
    assert t.leaf("lrdn0001") == "isw10100"  # not the Level=1 switch that also lists it
    assert t.leaf("lrdn0100") == "isw-L2-CELLG1"  # listed only there
    assert t.switches["isw10104"].parent == "isw-L2-CELLG1"  # named only as a child
    assert t.switches["isw-L2-CELLG1"].tier == 1
    assert t.ancestors("le-266-q14-1-res") == ["sp-266-p16-1"]


def test_topology_conf_bad_lines_are_errors_and_the_rest_is_read() -> None:
    text = "SwitchName=s0 Nodes=dev[0-\nthis is not a topology line\nNodes=x[1-2]\nSwitchName=s1 Nodes=dev[6-7] Level=top\nSwitchName=s1 Nodes=dev8\n"
    t = read_topology_conf(text)
    assert t.leaf_of == {"dev6": "s1", "dev7": "s1", "dev8": "s1"}
    assert len(t.errors) == 4
    assert "topology.conf:1: Nodes=: unbalanced '['" in t.errors[0]
    assert "topology.conf:2: not a Key=Value line" in t.errors[1]
    assert "topology.conf:3: no SwitchName=" in t.errors[2]
    assert "Level='top'" in t.errors[3]


# --------------------------------------------------------------------------- topology.yaml

MAN_PAGE_YAML = """\
- topology: topo1
  cluster_default: True
  tree:
    switches:
    - switch: sw_root
      children: s[1-2]
    - switch: s1
      nodes: node[01-04]
    - switch: s2
      nodes: node[05-08]
- topology: topo2
  cluster_default: False
  block:
    block_sizes:
      - 4
      - 16
    blocks:
    - block: b1
      nodes: node[01-04]
    - block: b2
      nodes: node[05-08]
- topology: topo3
  cluster_default: False
  flat: True
"""


def test_topology_yaml_reads_the_cluster_default_tree() -> None:
    t = read_topology_yaml(MAN_PAGE_YAML)
    assert t.errors == []
    assert t.leaf("node01") == "s1" and t.leaf("node08") == "s2"
    assert t.parent("s2") == "sw_root" and t.switches["sw_root"].tier == 1


def test_topology_yaml_block_when_it_is_the_default() -> None:
    t = read_topology_yaml(
        MAN_PAGE_YAML.replace("True", "X").replace(
            "cluster_default: False\n  block", "cluster_default: True\n  block"
        )
    )
    assert t.errors == []
    assert t.leaf_of["node05"] == "b2" and t.switches["b1"].tier == 0


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("- topology: [unclosed", "not valid YAML"),
        ("just a string", "no topology entries"),
        ("- topology: t\n  tree:\n    switches:\n    - nodes: n[1-2]\n", "no 'switch' name"),
        (
            "- topology: t\n  tree:\n    switches:\n    - switch: a\n      nodes: n[2-1]\n",
            "descending",
        ),
    ],
)
def test_topology_yaml_malformed(text: str, error: str) -> None:
    t = read_topology_yaml(text)
    assert any(error in e for e in t.errors), t.errors


# --------------------------------------------------------------------------- ibnetdiscover


def test_ibnetdiscover_cables_switch_names_and_tiers() -> None:
    t = read_ibnetdiscover((DATA / "ibnetdiscover.txt").read_text())
    assert t.errors == []
    assert t.taken_at == datetime(2026, 11, 1, 6, 0, 2, tzinfo=timezone.utc)
    unmanaged = "0x2c5eab036832a430"  # "Quantum Mellanox Technologies": named by GUID
    assert sorted(t.switches) == sorted(["ib-spine-01", "ib-leaf-01", unmanaged])
    assert t.switches["ib-leaf-01"].tier == 0 and t.switches[unmanaged].tier == 0
    assert t.switches["ib-spine-01"].tier == 1
    assert t.parent("ib-leaf-01") == "ib-spine-01"
    assert t.switches["ib-leaf-01"].guid == "0x2c5eab036832a42e"
    assert t.switches["ib-leaf-01"].description == "MF0;ib-leaf-01:MQM9701/U1"
    # read from the switch's port line and from the CA block: one cable
    a01 = t.cables_of("gpu-a01")
    assert [(c.host_port, c.switch, c.switch_port) for c in a01] == [
        ("mlx5_0", "ib-leaf-01", "1"),
        ("mlx5_1", "ib-leaf-01", "2"),
    ]
    assert a01[0].host_port_num == 1 and a01[0].host_guid == "0xe09d7303b4f1abf5"
    assert t.cable_at("ib-leaf-01", "9").node == "gpu-a02"
    # a CA seen only from its own block, on the unmanaged leaf
    b02 = t.cables_of("gpu-b02")[0]
    assert (b02.host_port, b02.switch, b02.switch_port) == ("mlx5_3", unmanaged, "14")
    assert t.cable_at("2c5eab036832a430", "12").node == "gpu-b01"  # by GUID, no 0x
    assert t.cable_by_host_guid("0xe09d7303b4f1ad25").node == "gpu-b01"
    assert t.leaf("gpu-a02") == "ib-leaf-01"
    assert t.nodes_under("ib-spine-01") == ["gpu-a01", "gpu-a02", "gpu-b01", "gpu-b02"]


def test_ibnetdiscover_lines_from_the_facts_file() -> None:
    """The verbatim Topograph / UFM-tools lines: switch-to-switch links and a CA port."""
    text = (
        'Switch\t41 "S-08c0eb03008cc87c"\t\t# "MF0;IB-ComputeSpine-03:MQM8700/U1" enhanced port 0 lid 304 lmc 0\n'
        '[1]\t"S-08c0eb0300539a5c"[23]\t\t# "MF0;IB-ComputeLeaf-101:MQM8700/U1" lid 1 4xHDR\n'
        "\n"
        'Switch\t65 "S-2c5eab036832a42e"\t\t# "MF0;LAB-IBLEAF-01:MQM9701/U1" enhanced port 0 lid 2 lmc 0\n'
        '[1]\t"H-e09d7303b4f1abf5"[1](e09d7303b4f1abf5) \t\t# "sched-worker1 mlx5_0" lid 100 4xNDR\n'
        "\n"
        'Ca\t1 "H-ec0d9a03007d7d0b"\t\t# "r-dcs96 HCA-2"\n'
    )
    t = read_ibnetdiscover(text)
    assert t.errors == []
    assert "IB-ComputeSpine-03" in t.switches and "IB-ComputeLeaf-101" in t.switches
    c = t.cables_of("sched-worker1")[0]
    assert (c.host_port, c.switch, c.switch_port, c.host_guid) == (
        "mlx5_0",
        "LAB-IBLEAF-01",
        "1",
        "0xe09d7303b4f1abf5",
    )
    assert t.switches["LAB-IBLEAF-01"].tier == 0
    assert t.cables_of("r-dcs96") == []  # a CA with no port line is not cabled


@pytest.mark.parametrize(
    ("desc", "name"),
    [
        ("MF0;ib-leaf-02:MQM9700/U1", "ib-leaf-02"),
        ("MF0;SJC3-A04-IB-ComputeLeaf-007:MQM8700/U1", "SJC3-A04-IB-ComputeLeaf-007"),
        ("Quantum Mellanox Technologies", "0xb8599f0300fc6de4"),
        ("SwitchIB Mellanox Technologies", "0xb8599f0300fc6de4"),
        ("ib-leaf-07", "ib-leaf-07"),  # --node-name-map
        ("", "0xb8599f0300fc6de4"),
    ],
)
def test_switch_names(desc: str, name: str) -> None:
    assert switch_name(desc, "B8599F0300FC6DE4") == name


def test_ibnetdiscover_malformed_lines_are_errors() -> None:
    text = (
        'Switch\t41 "S-b8599f0300fc6de4"\t\t# "MF0;r-ufm-sw95:MQM8700/U1" enhanced port 0 lid 13 lmc 0\n'
        '[3\t"S-0002c903007b78b0"[1]\n'
        "garbage here\n"
        '[4]\t"H-00aa"[1](00ab) \t\t# "" lid 1 4xHDR\n'
    )
    t = read_ibnetdiscover(text)
    assert len(t.errors) == 3
    assert ":2: unreadable port line" in t.errors[0] and ":3: unreadable line" in t.errors[1]
    assert "no node description" in t.errors[2]
    assert t.cables == [] and "r-ufm-sw95" in t.switches


def test_ibnetdiscover_port_line_before_any_node() -> None:
    t = read_ibnetdiscover('[1]\t"S-0002c903007b78b0"[1]\t\t# "x" lid 1 4xFDR\n')
    assert t.is_empty() and "unreadable port line" in t.errors[0]


# --------------------------------------------------------------------------- lldpctl -f json

LLDP_ONE = {  # lldpd tests/integration/test_lldpcli.py, with an ifname port (Cumulus)
    "lldp": {
        "interface": {
            "eth0": {
                "via": "LLDP", "rid": "1", "age": "0 day, 00:00:59",
                "chassis": {"leaf01": {"id": {"type": "mac", "value": "00:00:00:00:00:02"},
                                       "descr": "Cumulus Linux", "mgmt-ip": "fe80::200:ff:fe00:2",
                                       "capability": [{"type": "Bridge", "enabled": True}]}},
                "port": {"id": {"type": "ifname", "value": "swp2s0"}, "descr": "swp2s0",
                         "ttl": "120"},
            }
        }
    }
}  # fmt: skip


def test_lldp_single_interface_collapsed() -> None:
    t = read_lldp_json(json.dumps(LLDP_ONE), "gpu-r01")
    assert t.errors == []
    c = t.cables[0]
    assert (c.node, c.host_port, c.switch, c.switch_port, c.fabric) == (
        "gpu-r01",
        "eth0",
        "leaf01",
        "swp2s0",
        "ethernet",
    )
    assert t.leaf("gpu-r01") == "leaf01"


def test_lldp_list_of_one_key_objects() -> None:
    two = {"lldp": {"interface": [
        {"ens1f0np0": {"chassis": {"sonic-leaf-3": {"id": {"type": "mac", "value": "a"}}},
                       "port": {"id": {"type": "ifname", "value": "Ethernet8"}, "descr": "x"}}},
        {"ens1f1np1": {"chassis": {"sonic-leaf-4": {"id": {"type": "mac", "value": "b"}}},
                       "port": {"id": {"type": "mac", "value": "0c:42"}, "descr": "Ethernet12"}}},
    ]}}  # fmt: skip
    t = read_lldp_json(json.dumps(two), "gpu-r02")
    assert [(c.host_port, c.switch, c.switch_port) for c in t.cables] == [
        ("ens1f0np0", "sonic-leaf-3", "Ethernet8"),
        ("ens1f1np1", "sonic-leaf-4", "Ethernet12"),  # no ifname id: the port description
    ]
    assert t.leaf("gpu-r02") is None  # two leaves (rail-optimised): no single leaf


def test_lldp_json0() -> None:
    """`-f json0` exactly as lldpd's integration test expects it, with an ifname port."""
    j0 = {"lldp": [{"interface": [{
        "name": "eth0", "via": "LLDP", "rid": "1",
        "chassis": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}],
                     "name": [{"value": "ns-2.example.com"}],
                     "descr": [{"value": "Spectacular GNU/Linux 2016"}],
                     "mgmt-ip": [{"value": "fe80::200:ff:fe00:2"}],
                     "capability": [{"type": "Bridge", "enabled": False}]}],
        "port": [{"id": [{"type": "ifname", "value": "swp7"}], "descr": [{"value": "eth1"}],
                  "ttl": [{"value": "120"}]}],
    }]}]}  # fmt: skip
    t = read_lldp_json(json.dumps(j0), "node-c")
    assert [(c.host_port, c.switch, c.switch_port) for c in t.cables] == [
        ("eth0", "ns-2.example.com", "swp7")
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{not json", "not JSON"),
        ('{"other": 1}', "no 'lldp' object"),
        (
            '{"lldp": {"interface": {"eth0": {"port": {"id": {"type": "ifname", "value": "swp1"}}}}}}',
            "interface eth0: no switch name",
        ),
    ],
)
def test_lldp_malformed(text: str, error: str) -> None:
    t = read_lldp_json(text, "n")
    assert any(error in e for e in t.errors), t.errors
    assert t.cables == []


# --------------------------------------------------------------------------- node labels


def test_nodes_json_all_three_label_generations() -> None:
    t = read_nodes_json((DATA / "nodes.json").read_text())
    assert t.errors == []
    # older keys (block/spine/datacenter)
    assert t.leaf("gpu-old-1") == "s1" and t.parent("s1") == "s2" and t.parent("s2") == "s3"
    # current keys (leaf/spine/core), under the kubernetes.io prefix
    assert t.leaf("gpu-cur-1") == "leaf-07" and t.ancestors("leaf-07") == ["spine-2", "core-1"]
    # newest keys (tier-0/1/2) win over older ones on the same node
    assert t.leaf("gpu-new-1") == "S2" and t.ancestors("S2") == ["S1", "IB2"]
    assert t.switches["IB2"].tier == 2
    assert t.nvlink_domain_of["gpu-new-1"] == "50000000-0000-0000-0000-000000000005.4000000004"
    assert t.nvlink_domain_of["gpu-clique-1"] == "a1b2.7"  # nvidia.com/gpu.clique
    assert "cpu-1" not in t.all_nodes  # no topology labels


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[1,", "not JSON"),
        ('{"kind": "Pod"}', "not a list of Kubernetes nodes"),
        ('{"items": [{"metadata": {}}]}', "items[0] has no metadata.name"),
        ('{"items": [{"metadata": {"name": "n", "labels": [1]}}]}', "labels are not a mapping"),
    ],
)
def test_nodes_json_malformed(text: str, error: str) -> None:
    t = read_nodes_json(text)
    assert any(error in e for e in t.errors), t.errors


def test_nodes_json_conflicting_parents_are_reported() -> None:
    p = "network.topology.nvidia.com/"
    items = [
        {"metadata": {"name": "a", "labels": {p + "leaf": "L1", p + "spine": "S1"}}},
        {"metadata": {"name": "b", "labels": {p + "leaf": "L1", p + "spine": "S2"}}},
    ]
    t = read_nodes_json(json.dumps({"items": items}))
    assert t.parent("L1") == "S1" and "L1 is under S1 and S2" in t.errors[0]

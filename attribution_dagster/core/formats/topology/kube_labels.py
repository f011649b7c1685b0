"""Kubernetes node labels written by NVIDIA Topograph (`kubectl get nodes -o json`, or the
API's NodeList): the NVLink domain and the switch tiers above each node.

Labels live under `network.topology.nvidia.com/` (or `network.topology.kubernetes.io/`) in
three generations of keys: `block`/`spine`/`datacenter` (older), `leaf`/`spine`/`core`
(current), `tier-0`/`tier-1`/`tier-2` (newest); the newest present wins. `accelerator` is
the NVLink partition (`<ClusterUUID>.<CliqueId>`), as is the GPU Operator's
`nvidia.com/gpu.clique`. Format facts: TOPOLOGY-FACTS.md s4.
"""

from __future__ import annotations

import json
from typing import Any

from attribution_dagster.core.topology import Switch, Topology

PREFIXES = ("network.topology.nvidia.com/", "network.topology.kubernetes.io/")
# per tier, its key in each generation, newest first
TIER_KEYS: tuple[tuple[str, ...], ...] = (
    ("tier-0", "leaf", "block"),
    ("tier-1", "spine"),
    ("tier-2", "core", "datacenter"),
)
CLIQUE_LABEL = "nvidia.com/gpu.clique"


def read_nodes_json(text: str, source: str = "nodes.json") -> Topology:
    """`kubectl get nodes -o json` text -> Topology (see `topology_from_nodes`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Topology(sources=[source], errors=[f"{source}: not JSON: {exc}"])
    return topology_from_nodes(data, source)


def topology_from_nodes(data: Any, source: str = "nodes.json") -> Topology:
    """A `List`/`NodeList` (or one `Node`, or a plain list of them) -> leaf_of, the switch
    chain above each leaf and nvlink_domain_of; a node without topology labels is skipped."""
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        items = data["items"]
    elif isinstance(data, dict) and data.get("kind") == "Node":
        items = [data]
    elif isinstance(data, list):
        items = data
    else:
        return Topology(sources=[source], errors=[f"{source}: not a list of Kubernetes nodes"])
    topo = Topology(sources=[source])
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            topo.errors.append(f"{source}: items[{i}] has no metadata.name")
            continue
        labels = meta.get("labels") or {}
        if not isinstance(labels, dict):
            topo.errors.append(f"{source}: node {name}: labels are not a mapping")
            continue
        _add_node(topo, name, labels, source)
    return topo


def _label(labels: dict[str, Any], key: str) -> str | None:
    for prefix in PREFIXES:
        v = labels.get(prefix + key)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return None


def _add_node(topo: Topology, node: str, labels: dict[str, Any], source: str) -> None:
    domain = _label(labels, "accelerator") or labels.get(CLIQUE_LABEL)
    if isinstance(domain, str) and domain.strip():
        topo.nvlink_domain_of[node] = domain.strip()
    chain = [next((v for k in keys if (v := _label(labels, k))), None) for keys in TIER_KEYS]
    below: str | None = None
    for tier, sw in enumerate(chain):
        if sw is None:
            below = None  # a missing tier breaks the chain: never guess a parent
            continue
        known = topo.switches.get(sw)
        if known is None:
            topo.switches[sw] = Switch(name=sw, tier=tier)
        elif known.tier != tier:
            topo.errors.append(f"{source}: switch {sw} is tier {known.tier} and tier {tier}")
        if below is not None:
            child = topo.switches[below]
            if child.parent is None:
                topo.switches[below] = child.model_copy(update={"parent": sw, "uplinks": [sw]})
            elif child.parent != sw:
                topo.errors.append(
                    f"{source}: node {node}: {below} is under {child.parent} and {sw}; "
                    f"kept {child.parent}"
                )
        below = sw
    if chain[0] is not None:
        topo.leaf_of[node] = chain[0]

"""Slurm's topology: `topology.conf`, `scontrol show topology` and `topology.yaml`.

`topology.conf` (topology/tree and topology/block, slurm.conf(5)-style `Key=Value` lines,
keys case-insensitive, `#` comments) and `scontrol show topology` (the same lines plus
`Level=`, and on newer Slurm `Nodes=` on upper levels too) are one reader. A node's leaf is
the lowest switch that lists it (`Level=` when given, else its height in the tree), so the
upper levels' `Nodes=` never hide the leaf. `topology.yaml` (Slurm 25.05+) may hold several
named topologies; the `cluster_default` one is read. Format facts: TOPOLOGY-FACTS.md s3.
"""

from __future__ import annotations

import re
from typing import Any

from attribution_dagster.core.hostlist import expand_hostlist
from attribution_dagster.core.topology import Switch, Topology

_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=(\S*)")


class _Tree:
    """Switches with their child switches and listed nodes, levels resolved at the end."""

    def __init__(self) -> None:
        self.children: dict[str, list[str]] = {}
        self.nodes: dict[str, list[str]] = {}
        self.level: dict[str, int] = {}
        self.blocks: set[str] = set()
        self.errors: list[str] = []

    def add(self, name: str) -> None:
        self.children.setdefault(name, [])
        self.nodes.setdefault(name, [])

    def topology(self, source: str) -> Topology:
        for kid in [k for kids in self.children.values() for k in kids]:
            self.add(kid)  # a child named only in its parent's Switches=
        parent: dict[str, str] = {}
        for sw, kids in self.children.items():
            for kid in kids:
                if kid in parent and parent[kid] != sw:
                    self.errors.append(
                        f"{source}: switch {kid} is under both {parent[kid]} and {sw}; "
                        f"kept {parent[kid]}"
                    )
                    continue
                parent[kid] = sw
        height: dict[str, int] = {}

        def h(sw: str, seen: tuple[str, ...] = ()) -> int:
            if sw in height:
                return height[sw]
            if sw in seen:  # a loop in bad input: stop climbing
                return 0
            kids = self.children.get(sw, [])
            height[sw] = 0 if not kids else 1 + max(h(k, (*seen, sw)) for k in kids)
            return height[sw]

        levels = {sw: self.level.get(sw, h(sw)) for sw in self.children}
        leaf_of: dict[str, str] = {}
        for sw in sorted(self.children, key=lambda s: levels[s]):
            for node in self.nodes[sw]:
                leaf_of.setdefault(node, sw)  # the lowest switch listing the node
        switches = {
            sw: Switch(
                name=sw,
                tier=0 if sw in self.blocks else levels[sw],
                parent=parent.get(sw),
                uplinks=[parent[sw]] if sw in parent else [],
            )
            for sw in self.children
        }
        return Topology(
            sources=[source], switches=switches, leaf_of=leaf_of, errors=list(self.errors)
        )


def _hostlist(value: str, what: str, where: str, errors: list[str]) -> list[str]:
    try:
        return expand_hostlist(value)
    except ValueError as exc:
        errors.append(f"{where}: {what}: {exc}")
        return []


def read_topology_conf(text: str, source: str = "topology.conf") -> Topology:
    """`topology.conf` or `scontrol show topology` output -> Topology (bad lines in errors)."""
    tree = _Tree()
    for num, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{num}"
        pairs = {k.lower(): v for k, v in _PAIR.findall(line)}
        name = pairs.get("switchname") or pairs.get("blockname")
        if not pairs:
            tree.errors.append(f"{where}: not a Key=Value line: {line[:120]!r}")
            continue
        if "blocksizes" in pairs or "ringname" in pairs:
            continue  # block sizes say how jobs may span blocks; rings are not read
        if not name:
            tree.errors.append(f"{where}: no SwitchName= or BlockName=: {line[:120]!r}")
            continue
        tree.add(name)
        if "blockname" in pairs and "switchname" not in pairs:
            tree.blocks.add(name)
        if "level" in pairs:
            if pairs["level"].isdigit():
                tree.level[name] = int(pairs["level"])
            else:
                tree.errors.append(f"{where}: Level={pairs['level']!r} is not a number")
        for node in _hostlist(pairs.get("nodes", ""), "Nodes=", where, tree.errors):
            if node not in tree.nodes[name]:
                tree.nodes[name].append(node)
        for kid in _hostlist(pairs.get("switches", ""), "Switches=", where, tree.errors):
            if kid == name:
                tree.errors.append(f"{where}: switch {name} lists itself")
            elif kid not in tree.children[name]:
                tree.children[name].append(kid)
    return tree.topology(source)


def read_topology_yaml(text: str, source: str = "topology.yaml") -> Topology:
    """`topology.yaml`: the `cluster_default` topology (else the first), tree or block."""
    import yaml  # here: most runs read no topology.yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else source
        return Topology(sources=[source], errors=[f"{where}: not valid YAML: {exc}"[:300]])
    entries = [e for e in (data if isinstance(data, list) else [data]) if isinstance(e, dict)]
    if not entries:
        return Topology(sources=[source], errors=[f"{source}: no topology entries"])
    chosen = next((e for e in entries if _truthy(e.get("cluster_default"))), entries[0])
    label = f"{source} ({chosen.get('topology', '?')})"
    tree = _Tree()
    if isinstance(chosen.get("tree"), dict):
        for i, sw in enumerate(_list(chosen["tree"].get("switches"))):
            where = f"{label} switches[{i}]"
            name = sw.get("switch") if isinstance(sw, dict) else None
            if not isinstance(name, str) or not name:
                tree.errors.append(f"{where}: no 'switch' name")
                continue
            tree.add(name)
            tree.nodes[name] += _hostlist(_str(sw.get("nodes")), "nodes", where, tree.errors)
            kids = _hostlist(_str(sw.get("children")), "children", where, tree.errors)
            tree.children[name] += [k for k in kids if k != name]
    elif isinstance(chosen.get("block"), dict):
        for i, blk in enumerate(_list(chosen["block"].get("blocks"))):
            where = f"{label} blocks[{i}]"
            name = blk.get("block") if isinstance(blk, dict) else None
            if not isinstance(name, str) or not name:
                tree.errors.append(f"{where}: no 'block' name")
                continue
            tree.add(name)
            tree.blocks.add(name)
            tree.nodes[name] += _hostlist(_str(blk.get("nodes")), "nodes", where, tree.errors)
    elif not _truthy(chosen.get("flat")):
        tree.errors.append(f"{label}: neither tree, block nor flat")
    return tree.topology(source)


def _truthy(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() in {"true", "yes", "1"})


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str(v: Any) -> str:
    """A hostlist field: a string, or a YAML list of names / hostlists."""
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    return "" if v is None else str(v)

"""Where each host sits in its fabric: one typed model for every topology form (issue 23).

Slurm's `topology.conf` / `topology.yaml`, `ibnetdiscover`, `lldpctl -f json` and the node
labels NVIDIA Topograph writes all reduce to the same few facts: which leaf (or block) a
node hangs on, which switch is above which, which host port is cabled to which switch
port, and which NVLink domain a tray belongs to. Readers (connectors/topology) fill this
model; the rule engine only asks it questions, so it never knows which file told it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, Field

Fabric = Literal["ib", "ethernet"]


class Switch(BaseModel):
    """A switch (or a Slurm block) as the topology names it.

    `name` follows spec section 2: for an InfiniBand switch the host name inside its node
    description (`"MF0;ib-leaf-02:MQM9700/U1"` -> `ib-leaf-02`), else its GUID; otherwise
    the name the topology file, LLDP or the node label gives. `tier` 0 is a leaf or block
    (hosts hang on it), 1 a spine above leaves, 2 a core; None when the form does not say.
    """

    name: str
    tier: int | None = None
    parent: str | None = None  # the switch above, in a tree (None when several are)
    # every switch directly above: a fat tree's leaf links to several spines, so `parent`
    # is set only when there is exactly one, and `uplinks` lists them all
    uplinks: list[str] = Field(default_factory=list)
    guid: str | None = None  # InfiniBand node GUID, `0x...` lower case
    description: str | None = None  # the raw node description, when one was read


class Cable(BaseModel):
    """One host port cabled to one switch port: both ends of the wire."""

    node: str
    host_port: str  # `mlx5_0` (an HCA) or `ens1f0np0` (a netdev), as the host names it
    switch: str
    switch_port: str  # `9` (an InfiniBand port number) or `swp2s0` / `Ethernet8` (LLDP)
    fabric: Fabric = "ib"
    host_port_num: int | None = None  # the HCA's port number (`mlx5_0` port 1)
    host_guid: str | None = None  # the CA port GUID, how OpenSM names a dropped port


class Topology(BaseModel):
    """One snapshot of a cluster's topology, merged from every form that was present.

    Node names are as the topology spells them; callers resolve them to a job's nodes
    (core.hosts) before comparing.
    """

    taken_at: datetime | None = None  # when the snapshot was read or written
    sources: list[str] = Field(default_factory=list)  # files / commands it came from
    switches: dict[str, Switch] = Field(default_factory=dict)
    leaf_of: dict[str, str] = Field(default_factory=dict)  # node -> tier-0 switch or block
    cables: list[Cable] = Field(default_factory=list)
    nvlink_domain_of: dict[str, str] = Field(default_factory=dict)  # node -> NVLink domain
    errors: list[str] = Field(default_factory=list)  # what could not be read, and why

    def is_empty(self) -> bool:
        return not (self.switches or self.leaf_of or self.cables or self.nvlink_domain_of)

    # ------------------------------------------------------------------ questions
    def leaf(self, node: str) -> str | None:
        """The switch (or block) `node` hangs on: the tree says it, else its cables do."""
        if node in self.leaf_of:
            return self.leaf_of[node]
        switches = {c.switch for c in self.cables_of(node)}
        return next(iter(switches)) if len(switches) == 1 else None

    def parent(self, switch: str) -> str | None:
        sw = self.switches.get(switch)
        return sw.parent if sw else None

    def ancestors(self, switch: str) -> list[str]:
        """The switches above `switch`, nearest first (a loop in bad input stops the walk)."""
        out: list[str] = []
        cur = self.parent(switch)
        while cur is not None and cur not in out and cur != switch:
            out.append(cur)
            cur = self.parent(cur)
        return out

    def nodes_under(self, switch: str) -> list[str]:
        """Every node whose leaf is `switch` or lies below it."""
        return [n for n in self.all_nodes if self._under(n, switch)]

    def _under(self, node: str, switch: str) -> bool:
        leaf = self.leaf(node)
        return leaf is not None and (leaf == switch or switch in self.ancestors(leaf))

    def cables_of(self, node: str) -> list[Cable]:
        return self._cables_by_node.get(node, [])

    def cable_at(self, switch: str, switch_port: str) -> Cable | None:
        """The host cabled to a switch port (`switch` by name or GUID)."""
        name = self.switch_name(switch) or switch
        return self._cables_by_switch_port.get((name, str(switch_port)))

    def cable_by_host_guid(self, guid: str) -> Cable | None:
        return self._cables_by_guid.get(_guid(guid))

    def switch_name(self, name_or_guid: str) -> str | None:
        """A switch's topology name from its name or its GUID (with or without `0x`)."""
        if name_or_guid in self.switches:
            return name_or_guid
        return self._switch_by_guid.get(_guid(name_or_guid))

    @property
    def all_nodes(self) -> list[str]:
        seen = dict.fromkeys(self.leaf_of)
        seen.update(dict.fromkeys(c.node for c in self.cables))
        seen.update(dict.fromkeys(self.nvlink_domain_of))
        return list(seen)

    # ------------------------------------------------------------------ indexes
    @cached_property
    def _cables_by_node(self) -> dict[str, list[Cable]]:
        out: dict[str, list[Cable]] = {}
        for c in self.cables:
            out.setdefault(c.node, []).append(c)
        return out

    @cached_property
    def _cables_by_switch_port(self) -> dict[tuple[str, str], Cable]:
        return {(c.switch, c.switch_port): c for c in self.cables}

    @cached_property
    def _cables_by_guid(self) -> dict[str, Cable]:
        return {_guid(c.host_guid): c for c in self.cables if c.host_guid}

    @cached_property
    def _switch_by_guid(self) -> dict[str, str]:
        return {_guid(s.guid): s.name for s in self.switches.values() if s.guid}

    # ------------------------------------------------------------------ building
    def for_nodes(self, keep: Callable[[str], bool]) -> Topology:
        """This snapshot with only the nodes `keep` accepts (a job's, as the topology spells
        them): every switch stays, so names, GUIDs and the tree are whole, but a job does not
        carry the 32,768 cables of a 4,096-node fabric through each of its steps."""
        return Topology(
            taken_at=self.taken_at,
            sources=list(self.sources),
            switches=dict(self.switches),
            leaf_of={n: sw for n, sw in self.leaf_of.items() if keep(n)},
            cables=[c for c in self.cables if keep(c.node)],
            nvlink_domain_of={n: d for n, d in self.nvlink_domain_of.items() if keep(n)},
            errors=list(self.errors),
        )

    def merged(self, other: Topology) -> Topology:
        """This snapshot with `other`'s facts added (a fact already here wins)."""
        switches = dict(other.switches)
        for name, sw in self.switches.items():
            old = switches.get(name)
            switches[name] = sw if old is None else _merge_switch(sw, old)
        known = {(c.node, c.host_port, c.switch, c.switch_port) for c in self.cables}
        cables = self.cables + [
            c for c in other.cables if (c.node, c.host_port, c.switch, c.switch_port) not in known
        ]
        times = [t for t in (self.taken_at, other.taken_at) if t is not None]
        return Topology(
            taken_at=max(times) if times else None,
            sources=list(dict.fromkeys(self.sources + other.sources)),
            switches=switches,
            leaf_of={**other.leaf_of, **self.leaf_of},
            cables=cables,
            nvlink_domain_of={**other.nvlink_domain_of, **self.nvlink_domain_of},
            errors=self.errors + other.errors,
        )


def _merge_switch(mine: Switch, theirs: Switch) -> Switch:
    """Fill what `mine` does not say from `theirs` (a tree gives parents, ibnetdiscover GUIDs)."""
    update = {k: v for k, v in theirs.model_dump().items() if getattr(mine, k) in (None, [])}
    return mine.model_copy(update=update)


def _guid(value: str | None) -> str:
    v = (value or "").strip().lower()
    v = v[2:] if v.startswith("0x") else v
    return v.lstrip("0") or "0"


class TopologySnapshots(BaseModel):
    """A cluster's topology over time: fabrics are recabled, so each snapshot keeps the time
    it was taken, and a job is read against the one in force when it ran."""

    snapshots: list[Topology] = Field(default_factory=list)  # oldest first
    errors: list[str] = Field(default_factory=list)  # sources or snapshots that failed

    def model_post_init(self, _context: object) -> None:
        self.snapshots.sort(key=_snapshot_key)

    def snapshot_at(self, when: datetime | None) -> Topology | None:
        """The snapshot in force at `when`: the latest taken at or before it, else the
        earliest (a job older than every snapshot); an untimed snapshot counts as oldest.
        None when there is no snapshot."""
        if not self.snapshots:
            return None
        if when is None:
            return self.snapshots[-1]
        before = [s for s in self.snapshots if s.taken_at is None or _cmp(s.taken_at) <= _cmp(when)]
        return before[-1] if before else self.snapshots[0]

    @property
    def latest(self) -> Topology | None:
        return self.snapshots[-1] if self.snapshots else None


def _cmp(t: datetime) -> datetime:
    """Naive times are UTC, so snapshots and job times compare whatever their source."""
    from datetime import timezone

    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _snapshot_key(t: Topology) -> tuple[int, datetime]:
    from datetime import timezone

    return (
        (0, datetime.min.replace(tzinfo=timezone.utc))
        if t.taken_at is None
        else (
            1,
            _cmp(t.taken_at),
        )
    )

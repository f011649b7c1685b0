"""Step 0: switch-side lines become evidence about the job node at the other end of the cable.

A subnet manager, UFM or a switch's syslog names a switch port (`Switch 0x... port 14`,
`swp51`, `Ethernet8`), a port GUID or a host's node description, seldom a job node. The
parser catalog keeps such lines (`switch_side` parsers) on `CLUSTER_NODE`; here, once, the
cluster's topology maps each to the cable it is about (`Topology.cable_at`, by host port
GUID, or by the host and HCA a description names) and the line moves to that cable's job
node, with `attrs.switch` / `switch_port` / `host_port` set from the cable. This works when
the host's own kernel log says nothing. A line that maps to no job node (no topology, an
inter-switch link, a host outside the job) stays context: it is handed to the localisation
step (faultdomain.py: a switch named by the fabric itself) and never classified.

The same lookups give the cable of a host-side line (`mlx5_3:1 ... port error`,
`ibp94s0: Link down`) for `fault_domain.ports`.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.topology import Cable, Topology

__all__ = ["JobCables", "place"]


class JobCables:
    """The topology's cables indexed by the job node they end on (topology names resolved)."""

    def __init__(self, ctx: ExecutionContext, topology: Topology) -> None:
        self.topology = topology
        self.index = NodeIndex.of(ctx)
        self.by_node: dict[str, list[Cable]] = {}
        self.topo_name: dict[str, str] = {}  # job node -> the topology's spelling
        for name in topology.all_nodes:
            node = self.index.resolve(name)
            if node is not None:
                self.topo_name.setdefault(node, name)
        for c in topology.cables:
            node = self.index.resolve(c.node)
            if node is not None:
                self.by_node.setdefault(node, []).append(c)

    def job_node(self, topo_node: str) -> str | None:
        return self.index.resolve(topo_node)

    def leaf(self, node: str) -> str | None:
        """The switch a job node hangs on (the tree, else its only switch by cable)."""
        name = self.topo_name.get(node)
        return self.topology.leaf(name) if name is not None else None

    def cable(self, node: str, port: str | None) -> Cable | None:
        """The cable of a job node's port: `mlx5_3/1`, `mlx5_3` or a netdev as the topology
        spells it; a node with a single cable needs no port."""
        cables = self.by_node.get(node, [])
        if port:
            dev, _, num = str(port).partition("/")
            for c in cables:
                if c.host_port in (port, dev) and (
                    not num or c.host_port_num is None or str(c.host_port_num) == num
                ):
                    return c
        return cables[0] if len(cables) == 1 else None

    def of_observation(self, obs: Observation) -> Cable | None:
        """The cable a switch-side line is about: its switch port, its port GUID, or the host
        and HCA its node description names; None when the topology does not say."""
        a = obs.attrs
        port = a.get("switch_port")
        if port is not None:
            names = [a.get("switch"), a.get("switch_guid")]
            if not any(names):  # `swp17: setting kernel carrier: down` names no switch
                names = _dirs(obs)
            for name in names:
                if name:
                    c = self.topology.cable_at(str(name), str(port))
                    if c is not None:
                        return c
        if a.get("host_guid"):
            c = self.topology.cable_by_host_guid(str(a["host_guid"]))
            if c is not None:
                return c
        host = a.get("host")
        node = self.index.resolve(str(host)) if host else None
        if node is not None:
            return self.cable(node, a.get("host_port"))
        return None

    def switch_names(self, obs: Observation) -> list[str]:
        """The switches (topology names) a switch-side line names: its switch, its peer."""
        out = []
        for key in ("switch", "switch_guid", "peer_switch", "peer_switch_guid"):
            v = obs.attrs.get(key)
            name = self.topology.switch_name(str(v)) if v else None
            if name is not None and name not in out:
                out.append(name)
        if not out and obs.attrs.get("switch_port") is not None:
            out = [n for d in _dirs(obs) if (n := self.topology.switch_name(d))]
        return out


def _dirs(obs: Observation) -> list[str]:
    """The directories of the file a line came from (`logs/leaf01/syslog` -> `leaf01`):
    a cluster-level directory is named after its switch or tool (spec section 1)."""
    path = getattr(obs.locator, "path", None)
    return list(PurePosixPath(path).parts[:-1])[::-1] if path else []


def place(
    ctx: ExecutionContext,
    observations: list[Observation],
    topology: Topology | None,
    notes: list[str],
) -> tuple[list[Observation], list[Observation]]:
    """(observations with each switch-side line on the job node cabled to the port it names,
    the switch-side lines about no job node: context for the localisation step)."""
    if not any(o.node == CLUSTER_NODE or o.attrs.get("side") == "switch" for o in observations):
        return observations, []
    cables = JobCables(ctx, topology) if topology is not None else None
    out: list[Observation] = []
    context: list[Observation] = []
    for o in observations:
        if o.node != CLUSTER_NODE and o.attrs.get("side") != "switch":
            out.append(o)
            continue
        cable = cables.of_observation(o) if cables is not None else None
        node = o.node
        if node == CLUSTER_NODE:
            node = cables.job_node(cable.node) if cables is not None and cable else None
            if node is None:
                context.append(o)
                continue
        attrs = dict(o.attrs)
        if cable is not None and cables is not None and cables.job_node(cable.node) == node:
            attrs.update(
                switch=cable.switch, switch_port=cable.switch_port, host_port=cable.host_port
            )
        if o.node == CLUSTER_NODE:
            attrs["logged_on"] = CLUSTER_NODE
        port = o.port or attrs.get("host_port")
        out.append(o.model_copy(update={"node": node, "attrs": attrs, "port": port}))
    if context:
        why = "no topology maps them" if topology is None else "their ports lead to no job node"
        notes.append(
            f"{len(context)} switch-side line(s) are context only ({why}): "
            + ", ".join(sorted({o.parser or o.kind for o in context}))
        )
    return out, context

"""Step 6: where an attributed network or NVLink cause sits in the cluster's topology.

`fault_domain` (spec section 2) names the smallest part of the fabric that explains what was
hit, from the thresholds in rules.yaml `fault_domains:` (operators edit them there):

- `link`: the cables alone explain it: one host port and the switch port it is cabled to, or
  several cables of one switch whose other job nodes were fine (the switch is not named as
  the fault: its name is where the cables end);
- `leaf`: job nodes hit together under one leaf, and either at least `leaf.min_share` of the
  job's nodes under that switch were hit (default: all of them) or the fabric itself names
  the switch in the window (a switch-side line about it: its uplink, the switch dropped);
- `spine`: nodes under `spine.min_leaves` or more leaves of one spine hit together, each leaf
  qualifying as above, or the fabric naming the spine or the leaves' links to it;
- `nvlink_domain`: an NVLink fault on `nvlink_domain.min_nodes` or more trays of one NVLink
  domain, with a Fabric Manager or IMEX error (`evidence_origins`) in the window.

"Hit together": the cause's located observations within `within_seconds` of the widest burst.
A cause that locates no node (NCCL retry-exceeded from every peer) is placed only by what the
fabric says (switch-side lines naming switches above the affected nodes). No topology, a
category not listed in `categories`, or no node of the cause in the topology: None. Never
invented: every name comes from the topology and every node from the evidence.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import FaultDomain, FaultPort
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.core.topology import Cable, Topology
from attribution_dagster.rules.engine.items import Cand, Item, secs, utc
from attribution_dagster.rules.engine.rulebook import FaultDomainSpec
from attribution_dagster.rules.engine.switchside import JobCables

__all__ = ["FaultDomainSpec", "locate"]


def locate(
    ctx: ExecutionContext,
    top: Cand,
    observations: Iterable[Observation],
    context: list[Observation],
    topology: Topology | None,
    spec: FaultDomainSpec,
    settings: AnalysisSettings,
    notes: list[str],
) -> FaultDomain | None:
    """The fault domain of the attributed candidate `top`, or None (see the module doc).
    `observations`: the job's (kept) observations; `context`: switch-side lines about no job
    node (switchside.place)."""
    what = spec.categories.get(top.category)
    if topology is None or topology.is_empty() or what is None:
        return None
    cables = JobCables(ctx, topology)
    window = settings.window(ctx)
    context = [o for o in context if (t := utc(o.time)) is None or window.contains(t)]
    if what == "nvlink":
        fd = _nvlink(top, [*observations, *context], cables, spec)
    else:
        fd = _network(top, context, cables, spec, settings)
    if fd is not None:
        notes.append(f"fault domain: {fd.describe()}")
    return fd


# ---------------------------------------------------------------- network
def _hits(top: Cand, width: float) -> dict[str, list[Item]]:
    """Located items of the cause, by job node, within `width` s of the widest burst (untimed
    items count when nothing is timed)."""
    located = [i for i in top.items if i.rule.locates]
    timed = sorted((i for i in located if i.t is not None), key=lambda i: i.t)  # type: ignore[arg-type,return-value]
    best: list[Item] = [i for i in located if i.t is None] if not timed else []
    for k, first in enumerate(timed):
        assert first.t is not None
        burst = [x for x in timed[k:] if x.t is not None and secs(x.t, first.t) <= width]
        if len({x.obs.node for x in burst}) > len({x.obs.node for x in best}):
            best = burst
    out: dict[str, list[Item]] = defaultdict(list)
    for i in best:
        out[i.obs.node].append(i)
    return dict(out)


def _cable_of(node: str, items: list[Item], cables: JobCables) -> Cable | None:
    for i in items:  # switch-side first: the line named the switch port itself
        sw, port = i.obs.attrs.get("switch"), i.obs.attrs.get("switch_port")
        if sw and port is not None:
            c = cables.topology.cable_at(str(sw), str(port))
            if c is not None and cables.job_node(c.node) == node:
                return c
    for i in items:
        c = cables.cable(node, i.obs.port)
        if c is not None and (i.obs.port or len(cables.by_node.get(node, [])) == 1):
            return c
    return None


def _port(node: str, cable: Cable | None, items: list[Item], leaf: str | None) -> FaultPort:
    if cable is not None:
        return FaultPort(
            node=node, host_port=cable.host_port, switch=cable.switch, switch_port=cable.switch_port
        )
    port = next((i.obs.port for i in items if i.obs.port), None)
    return FaultPort(node=node, host_port=port, switch=leaf)


def _under(cables: JobCables, switch: str) -> set[str]:
    """The job nodes cabled to `switch`, or whose leaf is it or lies below it."""
    out = {n for n, cs in cables.by_node.items() if any(c.switch == switch for c in cs)}
    for node in cables.topo_name:
        leaf = cables.leaf(node)
        if leaf is not None and (leaf == switch or switch in cables.topology.ancestors(leaf)):
            out.add(node)
    return out


def _common(topology: Topology, switches: list[str]) -> str | None:
    """The nearest switch that is each of `switches` or above it."""
    chains = [[s, *topology.ancestors(s)] for s in switches]
    for s in chains[0]:
        if all(s in ch for ch in chains[1:]):
            return s
    return None


def _network(
    top: Cand,
    context: list[Observation],
    cables: JobCables,
    spec: FaultDomainSpec,
    settings: AnalysisSettings,
) -> FaultDomain | None:
    named = {s for o in context for s in cables.switch_names(o)}  # the fabric names these
    hits = _hits(top, spec.within_seconds + settings.skew_seconds)
    if not hits:
        return _by_fabric(top, named, cables, spec)
    ports: dict[str, FaultPort] = {}
    by_switch: dict[str, list[str]] = defaultdict(list)
    for node, items in sorted(hits.items()):
        cable = _cable_of(node, items, cables)
        switch = cable.switch if cable is not None else cables.leaf(node)
        if switch is None:
            continue  # a node the topology does not know
        ports[node] = _port(node, cable, items, switch)
        by_switch[switch].append(node)
    if not by_switch:
        return None

    def leaf_ok(switch: str, nodes: list[str]) -> bool:
        if len(nodes) < spec.leaf.min_nodes:
            return False
        under = _under(cables, switch) or set(nodes)
        share = len(set(nodes) & under) / len(under)
        return share >= spec.leaf.min_share or (spec.leaf.switch_evidence and switch in named)

    def domain(level: str, name: str, nodes: Iterable[str]) -> FaultDomain:
        nodes = sorted(nodes)
        return FaultDomain(
            level=level,  # type: ignore[arg-type]
            name=name,
            nodes=nodes,
            ports=sorted((ports[n] for n in nodes), key=_port_key),
        )

    if len(by_switch) == 1:
        switch, nodes = next(iter(by_switch.items()))
        return domain("leaf" if leaf_ok(switch, nodes) else "link", switch, nodes)
    every = [n for ns in by_switch.values() for n in ns]
    spine = _common(cables.topology, list(by_switch))
    if spine is not None and len(by_switch) >= spec.spine.min_leaves:
        evidence = spec.spine.switch_evidence and (
            spine in named or sum(s in named for s in by_switch) >= spec.spine.min_leaves
        )
        if evidence or all(leaf_ok(s, ns) for s, ns in by_switch.items()):
            return domain("spine", spine, every)
    # cables on several switches that no shared switch explains: the best-hit switch's, if one
    # alone qualifies as a leaf; else no single domain (each cable is in the suspects)
    ok = [s for s, ns in by_switch.items() if leaf_ok(s, ns)]
    if len(ok) == 1:
        return domain("leaf", ok[0], by_switch[ok[0]])
    return None


def _by_fabric(
    top: Cand, named: set[str], cables: JobCables, spec: FaultDomainSpec
) -> FaultDomain | None:
    """A cause that locates no node (peers' transport errors): the switch the fabric names
    above the affected nodes, when it does; a leaf, or a spine over several leaves."""
    affected = sorted(set(top.affected) & set(cables.topo_name))
    leaves = {n: cables.leaf(n) for n in affected}
    over = [
        s
        for s in named
        if any(lf is not None and (lf == s or s in cables.topology.ancestors(lf)) for lf in leaves.values())
    ]
    if not over:
        return None
    where = _common(cables.topology, sorted(over))
    if where is None:
        return None
    nodes = [n for n in affected if n in _under(cables, where)]
    hit_leaves = {leaves[n] for n in nodes if leaves[n] is not None}
    if where in hit_leaves:
        level = "leaf"
    elif spec.spine.switch_evidence and len(hit_leaves) >= spec.spine.min_leaves:
        level = "spine"
    else:
        return None
    return FaultDomain(level=level, name=where, nodes=nodes)  # type: ignore[arg-type]


def _port_key(p: FaultPort) -> tuple[str, int, str]:
    sp = p.switch_port or ""
    return (p.switch or "", int(sp) if sp.isdigit() else 1 << 30, sp + p.node)


# ---------------------------------------------------------------- NVLink
def _nvlink(
    top: Cand, observations: list[Observation], cables: JobCables, spec: FaultDomainSpec
) -> FaultDomain | None:
    domains = cables.topology.nvlink_domain_of
    hit: dict[str, list[Item]] = defaultdict(list)
    for i in top.items:
        if i.rule.locates and i.obs.node in cables.topo_name:
            hit[i.obs.node].append(i)
    by_domain: dict[str, list[str]] = defaultdict(list)
    for node in sorted(hit):
        d = domains.get(cables.topo_name[node])
        if d is not None:
            by_domain[d].append(node)
    if not by_domain:
        return None
    name, nodes = max(by_domain.items(), key=lambda kv: (len(kv[1]), kv[0]))
    if len(nodes) < spec.nvlink_domain.min_nodes:
        return None
    origins = set(spec.nvlink_domain.evidence_origins)
    members = {n for n, d in ((n, domains.get(t)) for n, t in cables.topo_name.items()) if d == name}
    fm = [
        o
        for o in observations
        if o.attrs.get("origin") in origins and (o.node in members or o.node not in cables.topo_name)
    ]
    if not fm:
        return None
    ports = [
        FaultPort(node=n, host_port=next((i.obs.port for i in hit[n] if i.obs.port), None))
        for n in nodes
    ]
    return FaultDomain(level="nvlink_domain", name=name, nodes=nodes, ports=ports)

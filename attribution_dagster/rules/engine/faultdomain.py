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
from attribution_dagster.rules.engine.items import Cand, Item, utc, widest_burst
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
    if timed:
        start, end = widest_burst(timed, width)
        best = timed[start:end]
    out: dict[str, list[Item]] = defaultdict(list)
    for i in best:
        out[i.obs.node].append(i)
    return dict(out)


def _cables_of(node: str, items: list[Item], cables: JobCables) -> list[Cable]:
    """Every cable of `node` its items name: a switch port (switch-side lines), else the host
    port (`mlx5_10/1`, a netdev); a port-less line on a single-cable node names that one."""
    out: list[Cable] = []
    for i in items:
        sw, port = i.obs.attrs.get("switch"), i.obs.attrs.get("switch_port")
        c = cables.topology.cable_at(str(sw), str(port)) if sw and port is not None else None
        if c is None or cables.job_node(c.node) != node:
            c = cables.cable(node, i.obs.port)
            if c is not None and not i.obs.port and len(cables.by_node.get(node, [])) != 1:
                c = None
        if c is not None and c not in out:
            out.append(c)
    return out


def _under(cables: JobCables, switch: str) -> set[str]:
    """The job nodes cabled to `switch`, or whose leaf is it or lies below it."""
    out = {n for n, cs in cables.by_node.items() if any(c.switch == switch for c in cs)}
    for node in cables.topo_name:
        leaf = cables.leaf(node)
        if leaf is not None and switch in _reach(cables.topology, leaf):
            out.add(node)
    return out


def _reach(topology: Topology, switch: str) -> dict[str, int]:
    """`switch` and every switch above it, with its distance: through `parent` in a tree, or
    every `uplinks` entry in a fat tree (a leaf under several spines). A loop stops the walk."""
    dist = {switch: 0}
    frontier = [switch]
    while frontier:
        nxt = []
        for x in frontier:
            sw = topology.switches.get(x)
            ups = [] if sw is None else [sw.parent] if sw.parent else list(sw.uplinks)
            for up in ups:
                if up not in dist:
                    dist[up] = dist[x] + 1
                    nxt.append(up)
        frontier = nxt
    return dist


def _common(topology: Topology, switches: list[str], named: set[str]) -> str | None:
    """The nearest switch that is each of `switches` or above it. Several at the same
    distance (a fat tree's spines are all above every leaf): the one the fabric names, else
    None (hosts alone cannot tell which spine)."""
    reach = [_reach(topology, s) for s in switches]
    shared = set(reach[0]).intersection(*reach[1:])
    if not shared:
        return None
    far = {x: max(r[x] for r in reach) for x in shared}
    best = min(far.values())
    tied = sorted(x for x in shared if far[x] == best)
    if len(tied) == 1:
        return tied[0]
    picked = [x for x in tied if x in named]
    return picked[0] if len(picked) == 1 else None


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
    ports: dict[str, list[FaultPort]] = defaultdict(list)  # by switch
    by_switch: dict[str, list[str]] = defaultdict(list)
    for node, items in sorted(hits.items()):
        found = _cables_of(node, items, cables)
        if not found:  # no cable known: the node's leaf, and the host port its lines name
            leaf = cables.leaf(node)
            if leaf is None:
                continue  # a node the topology does not know
            port = next((i.obs.port for i in items if i.obs.port), None)
            ports[leaf].append(FaultPort(node=node, host_port=port, switch=leaf))
            by_switch[leaf].append(node)
        for c in found:
            ports[c.switch].append(
                FaultPort(
                    node=node, host_port=c.host_port, switch=c.switch, switch_port=c.switch_port
                )
            )
            if node not in by_switch[c.switch]:
                by_switch[c.switch].append(node)
    if not by_switch:
        return None

    def leaf_ok(switch: str, nodes: list[str]) -> bool:
        if len(nodes) < spec.leaf.min_nodes:
            return False
        under = _under(cables, switch) or set(nodes)
        share = len(set(nodes) & under) / len(under)
        return share >= spec.leaf.min_share or (spec.leaf.switch_evidence and switch in named)

    def domain(level: str, name: str, switches: Iterable[str]) -> FaultDomain:
        switches = list(switches)
        return FaultDomain(
            level=level,  # type: ignore[arg-type]
            name=name,
            nodes=sorted({n for s in switches for n in by_switch[s]}),
            # the cables the topology knows (spec: "as far as the topology tells"): a node
            # whose cable is unknown is in `nodes`, under the switch named, with no port
            ports=sorted(
                (p for s in switches for p in ports[s] if p.switch_port is not None),
                key=_port_key,
            ),
        )

    if len(by_switch) == 1:
        switch, nodes = next(iter(by_switch.items()))
        return domain("leaf" if leaf_ok(switch, nodes) else "link", switch, [switch])
    spine = _common(cables.topology, list(by_switch), named)
    if spine is not None and len(by_switch) >= spec.spine.min_leaves:
        evidence = spec.spine.switch_evidence and (
            spine in named or sum(s in named for s in by_switch) >= spec.spine.min_leaves
        )
        if evidence or all(leaf_ok(s, ns) for s, ns in by_switch.items()):
            return domain("spine", spine, by_switch)
    # cables on several switches that no shared switch explains: the best-hit switch's, if one
    # alone qualifies as a leaf; else no single domain (each cable is in the suspects)
    ok = [s for s, ns in by_switch.items() if leaf_ok(s, ns)]
    if len(ok) == 1:
        return domain("leaf", ok[0], ok)
    return None


def _by_fabric(
    top: Cand, named: set[str], cables: JobCables, spec: FaultDomainSpec
) -> FaultDomain | None:
    """A cause that locates no node (peers' transport errors): the switch the fabric names
    above the affected nodes, when it does; a leaf, or a spine over several leaves."""
    affected = sorted(set(top.affected) & set(cables.topo_name))
    leaves = {n: cables.leaf(n) for n in affected}
    # what is above each leaf, once per leaf (a 1,024-node job has a few dozen leaves)
    above = [_reach(cables.topology, lf) for lf in dict.fromkeys(leaves.values()) if lf is not None]
    over = [s for s in named if any(s in r for r in above)]
    if not over:
        return None
    where = _common(cables.topology, sorted(over), named)
    if where is None:
        return None
    under = _under(cables, where)
    nodes = [n for n in affected if n in under]
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
    members = {
        n for n, d in ((n, domains.get(t)) for n, t in cables.topo_name.items()) if d == name
    }
    fm = [
        o
        for o in observations
        if o.attrs.get("origin") in origins
        and (o.node in members or o.node not in cables.topo_name)
    ]
    if not fm:
        return None
    # NVLink runs through the trays' NVSwitches, not through cables a topology file lists
    return FaultDomain(level="nvlink_domain", name=name, nodes=nodes)

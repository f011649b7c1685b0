"""Who stopped first, and who do the others point at (issue 9): peer blame and silence.

Pure functions over a job's observations, used by the rule engine before it ranks causes.

- `learn_addresses`: addresses job nodes use, from the job's own NCCL lines (`node_address`
  observations) merged with the context's `node_addresses`; an address claimed by two nodes
  (a docker bridge, a link-local) is dropped.
- `converge`: errors that name a remote peer (IB completion status, NCCL / Gloo connection
  closed or reset) are symptoms about that peer. When most reporting nodes name one node, that
  node is where the failure started.
- `last_seen` / `silent`: where each node's logs stop (the last timed line of each of its files,
  `log_last_line`, and any timed line of its own; not a Kubernetes Event about it, which the
  control plane writes when the node is gone); a node that stopped writing well before the
  others is silent. A `log_last_line` may be an interval (`time` .. `time_latest`: a log store
  counted lines per bucket, Loki's `count_over_time`): silence then has to hold for its latest
  possible time against the others' earliest.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.locators import Locator
from attribution_dagster.core.observation import Observation


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def learn_ranks(ctx: ExecutionContext, observations: Iterable[Observation]) -> dict[int, str]:
    """Global rank -> node, from NCCL init lines of the job's largest communicator (the world;
    ranks of smaller communicators are not global). A rank claimed by two nodes is dropped."""
    base = NodeIndex.of(ctx)
    seen: list[tuple[int, int, str]] = []
    for o in observations:
        if o.kind != "node_address" or not isinstance(o.attrs.get("rank"), int):
            continue
        node = base.resolve(o.node)
        if node is not None:
            seen.append((int(o.attrs.get("nranks") or 0), int(o.attrs["rank"]), node))  # type: ignore[arg-type]
    if not seen:
        return {}
    world = max(n for n, _, _ in seen)
    claims: dict[int, set[str]] = defaultdict(set)
    for n, rank, node in seen:
        if n == world:
            claims[rank].add(node)
    return {r: next(iter(ns)) for r, ns in claims.items() if len(ns) == 1}


def learn_addresses(ctx: ExecutionContext, observations: Iterable[Observation]) -> NodeIndex:
    """A NodeIndex of the job's nodes that also knows the addresses its logs revealed."""
    base = NodeIndex.of(ctx)
    claims: dict[str, set[str]] = defaultdict(set)
    for node, names in (ctx.node_addresses or {}).items():
        target = base.resolve(node)
        if target is not None:
            for name in names:
                claims[str(name).strip().lower()].add(target)
    for o in observations:
        if o.kind != "node_address":
            continue
        addr = str(o.attrs.get("address") or "").split("%", 1)[0].strip().lower()
        node = base.resolve(o.node)
        if addr and node is not None and not addr.startswith(("127.", "::1", "fe80:")):
            claims[addr].add(node)
    addresses: dict[str, list[str]] = defaultdict(list)
    for addr, nodes in claims.items():
        if len(nodes) == 1:
            addresses[next(iter(nodes))].append(addr)
    return NodeIndex(ctx.nodes, addresses)


def peer_node(
    obs: Observation, index: NodeIndex, ranks: dict[int, str] | None = None
) -> str | None:
    """The job node an observation's `peer` (IP, IP:port, host name) or `attrs.peer_rank`
    names, if any."""
    rank = obs.attrs.get("peer_rank")
    if isinstance(rank, int) and ranks and rank in ranks:
        return ranks[rank]
    peer = obs.peer or obs.attrs.get("peer_host")
    if not isinstance(peer, str) or not peer.strip():
        return None
    return index.resolve(peer.strip().split("<", 1)[0])


@dataclass
class Convergence:
    """Peer errors of a job: who names whom."""

    named: dict[str, set[str]] = field(default_factory=dict)  # peer node -> reporting nodes
    suspect: str | None = None  # the node most reporters point at, when they converge
    why: str = ""


def converge(
    named: dict[str, set[str]], n_nodes: int, complaining: set[str] | None = None
) -> Convergence:
    """Most reporters name one node: it is the suspect. A tie, or a node named by too few of
    the reporters (errors toward many unrelated peers), converges on nobody. Two reporters are
    needed, except in a two-node job where the named node does not itself complain of a remote
    failure (`complaining`: nodes reporting peer / remote errors of their own)."""
    c = Convergence(named=named)
    if not named:
        return c
    ranked = sorted(named.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    top, reporters = ranked[0]
    second = len(ranked[1][1]) if len(ranked) > 1 else 0
    everyone = set().union(*named.values()) - {top}
    need = 2
    if n_nodes == 2 and top not in (complaining or set()):
        need = 1
    if len(reporters) >= need and len(reporters) > second and len(reporters) * 2 >= len(everyone):
        c.suspect = top
        c.why = (
            f"peers' errors converge on {top}: {len(reporters)} of {len(everyone)} reporting "
            f"node(s) name it ({', '.join(sorted(reporters)[:6])}"
            f"{' ...' if len(reporters) > 6 else ''})"
        )
    elif len(ranked) > 1:
        c.why = (
            f"peer errors name {len(named)} different nodes without converging on one "
            f"(most named: {top} by {len(reporters)})"
        )
    return c


_DIGITS = re.compile(r"\d+")
# the random suffix Kubernetes appends to a generated name (pods of a Job / JobSet:
# `<job>-<index>-x9c4w`; utilrand.String's alphabet, no vowels, no 0 1 3), before the digits
# are folded: logs saved per pod (`<pod>.log`) are the same kind of log on every node
_GENERATED = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}(?=\.[a-z]+$|$)")


@lru_cache(maxsize=4096)  # a job's logs have a few file names, each line looks its own up
def _fold(name: str) -> str:
    return _DIGITS.sub("#", _GENERATED.sub("-*", name))


def stream_key(locator: Locator) -> str:
    """Which kind of log a locator points into, comparable across nodes: the file name with
    digits folded (`workers-0-3_pytorch.log`, `slurm-4812.out`, `app.log`, a pod's
    `job-worker-1-0-x9c4w.log`)."""
    return _fold(locator.stream.rsplit("/", 1)[-1])


def _key(o: Observation) -> str:
    """A `log_last_line` names its stream (file name, or a log store's stream label, or a
    container: its locator may be a query); other lines are keyed by their locator's file."""
    stream = o.attrs.get("stream") if o.kind == "log_last_line" else None
    if isinstance(stream, str) and stream:
        return _fold(stream)
    return stream_key(o.locator)


def _interval(o: Observation) -> bool:
    return o.time_quality != "exact" and o.time_latest is not None


def latest_time(o: Observation) -> datetime:
    """The latest time the observation's line can have been written."""
    return _utc(o.time_latest if _interval(o) else o.time)  # type: ignore[return-value]


Seen = dict[str, dict[str, Observation]]  # node -> stream key -> its latest timed line


def last_seen(observations: Iterable[Observation], nodes: Iterable[str]) -> Seen:
    """Per node and kind of log, its latest timed line: the last timed line of each file
    (`log_last_line`, exact or a bounded interval), or any exactly timed observation logged on
    that node itself."""
    wanted = set(nodes)
    out: Seen = defaultdict(dict)
    for o in observations:
        if o.node not in wanted or o.time is None:
            continue
        if o.time_quality != "exact" and not (o.kind == "log_last_line" and _interval(o)):
            continue
        if o.kind != "log_last_line" and ("logged_on" in o.attrs or o.kind == "job_state"):
            continue
        if o.attrs.get("origin") in ("dcgm", "metric", "prometheus"):
            continue  # an exporter keeps scraping a node whose workload is gone
        if "event_reason" in o.attrs:
            continue  # a Kubernetes Event: the control plane writing about the node, not it
        key = _key(o)
        cur = out[o.node].get(key)
        if cur is None or latest_time(o) > latest_time(cur):
            out[o.node][key] = o
    return out


def latest(seen: Seen, node: str) -> Observation | None:
    mine = list(seen.get(node, {}).values())
    return max(mine, key=latest_time) if mine else None


class Theirs:
    """Per kind of log, every node's last line time, sorted once: the median of the other
    nodes' is then read for each node without listing them again (a 1,024-node NODE_FAIL
    job asks it of every node)."""

    def __init__(self, seen: Seen) -> None:
        self.times: dict[str, list[datetime]] = defaultdict(list)
        for streams in seen.values():
            for key, o in streams.items():
                self.times[key].append(_utc(o.time))  # type: ignore[arg-type]
        for ts in self.times.values():
            ts.sort()

    def median_low(self, key: str, mine: datetime) -> datetime | None:
        """`statistics.median_low` of the other nodes' times in `key` (`mine` is this node's
        own, one of them); None when no other node has that kind of log."""
        ts = self.times.get(key, [])
        if len(ts) < 2:
            return None
        i = bisect.bisect_left(ts, mine)  # one copy of `mine` left out: ts[i]
        k = (len(ts) - 2) // 2  # median_low of the len(ts) - 1 others
        return ts[k] if k < i else ts[k + 1]


def silent(
    node: str, seen: Seen, end: datetime, gap_seconds: float, theirs: Theirs | None = None
) -> Observation | None:
    """The last line of `node` when it stopped writing: at least `gap_seconds` before the
    job end and before the other nodes' last lines (median) in some kind of log it shares
    with them, and in no shared kind of log writing on after theirs stopped. Comparing within
    a kind of log keeps a node that only has a quiet kern.log from looking silent next to
    nodes with chatty training logs; a log that went quiet on every node at once (a kern.log
    with nothing to say) neither proves nor disproves it. None when not silent."""
    last = latest(seen, node)
    if last is None:
        return None
    gap = timedelta(seconds=gap_seconds)
    # provably silent only: its latest possible time against the others' earliest
    stopped = latest_time(last) + gap
    if stopped > _utc(end):  # type: ignore[operator]
        return None
    shown = False
    for key, o in seen.get(node, {}).items():
        if theirs is not None:
            median = theirs.median_low(key, _utc(o.time))  # type: ignore[arg-type]
        else:
            others = [_utc(s[key].time) for n, s in seen.items() if n != node and key in s]
            median = statistics.median_low(others) if others else None
        if median is None:
            continue
        if latest_time(o) >= median + gap:
            return None  # it wrote on in this log after the others had stopped: alive
        shown = shown or stopped <= median
    return last if shown else None


def lone_failed_exit(observations: Iterable[Observation]) -> Observation | None:
    """The first exit of the one node whose tasks ended on their own (srun `Exited with exit
    code N`, torchrun's child `exitcode: N`, 0 < N < 128), when no other node's task did:
    the others were terminated after it (srun --kill-on-bad-exit, torchrun's teardown). When
    nothing explains a failure, that node is where to look first. None when no node or
    several nodes failed on their own, or a signal ended the task (a kill has a cause
    elsewhere)."""
    own = [
        o
        for o in observations
        if o.kind in ("process_exit", "child_failed")
        and isinstance(o.attrs.get("exit_code"), int)
        and 0 < o.attrs["exit_code"] < 128  # type: ignore[operator]
        and not o.attrs.get("signal")
    ]
    if len({o.node for o in own}) != 1:
        return None
    timed = [o for o in own if o.time is not None]
    return min(timed, key=lambda o: _utc(o.time)) if timed else own[0]  # type: ignore[arg-type,return-value]

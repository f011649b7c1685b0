"""Per-node clock offsets from lines every node logs at the same true instant.

Why: the engine orders causes before symptoms. A node whose clock runs ahead makes its own
fault look like a late consequence of the errors it caused on its peers (a host OOM kill
logged 70 s "after" the peers' NCCL errors). The skew tolerance (AnalysisSettings.skew_seconds)
absorbs small differences; a larger offset has to be learned.

Clusters log events that happen at (nearly) the same true instant on every node of a job:
slurmd's `launch task StepId=<job>.<step>` (one step launch fans out to all its nodes within a
second) and NCCL's `commId 0x<id> - Init COMPLETE` (all ranks of a communicator leave init
together). Parsers turn them into `clock_anchor` observations (attrs anchor, key); lines with
the same (anchor, key) on several nodes form a *group*.

Estimation (`estimate`), pure and deterministic:

1. per group and node, the node's earliest exact time; groups seen on fewer than 2 nodes are
   dropped;
2. groups are taken in order of how many nodes they cover (most first): the first sets the
   reference (its median time); a later group is referenced to the nodes already estimated
   (the median of their times minus their offsets), else to its own median;
3. a node's offset is the median of its per-group offsets. It is applied only when it is
   larger than the tolerance and every group agrees on it within the tolerance; a node whose
   groups disagree by more than the tolerance (its clock stepped mid-job, or a group was not
   one event) is left as logged, with a note saying why.

`apply` shifts the observations a node's clock stamped (time and time_latest) by -offset.
Times from elsewhere (Prometheus samples, Kubernetes Events, cluster-level logs) keep theirs.
Observation excerpts and locators are untouched: the quoted line keeps its raw time.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.core.observation import Observation

ANCHOR_KIND = "clock_anchor"
ANCHOR_LABELS = {"slurm_step": "slurmd step launch", "nccl_init": "NCCL init of comm"}
# observations whose time another machine stamped (a scrape, an API server's Event)
FOREIGN_ORIGINS = {"dcgm", "metric", "prometheus"}
Resolve = Callable[[str], "str | None"]  # a host name -> the job node it names (NodeIndex)


@dataclass(frozen=True)
class Anchor:
    """One anchor line: `node`'s clock read `time` when event (`anchor`, `key`) happened."""

    node: str
    anchor: str
    key: str
    time: datetime


@dataclass
class ClockEstimate:
    offsets: dict[str, float] = field(default_factory=dict)  # applied: node -> seconds ahead
    notes: list[str] = field(default_factory=list)
    groups: int = 0  # usable anchor groups (on >= 2 nodes)


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _label(anchor: str, key: str) -> str:
    return f"{ANCHOR_LABELS.get(anchor, anchor)} {key}"


def _secs(s: float) -> str:
    return f"{s:.0f}" if abs(s) >= 10 else f"{s:.1f}".rstrip("0").rstrip(".")


def clock_node(o: Observation) -> str | None:
    """The node whose clock stamped the observation's time, or None (a scrape, an Event, a
    cluster-level line): the file's node when a host in the line moved it elsewhere."""
    if str(o.attrs.get("origin") or "").lower() in FOREIGN_ORIGINS or "event_reason" in o.attrs:
        return None
    logged_on = o.attrs.get("logged_on")
    node = str(logged_on) if isinstance(logged_on, str) and logged_on else o.node
    return None if node == CLUSTER_NODE else node  # a line from no job node (controller)


def anchors_of(observations: Iterable[Observation], resolve: Resolve) -> list[Anchor]:
    """Exact-time clock anchors; `resolve` maps a node name to a job node (or None)."""
    out: list[Anchor] = []
    for o in observations:
        if o.kind != ANCHOR_KIND or o.time is None or o.time_quality != "exact":
            continue
        node = clock_node(o)
        node = resolve(node) if node is not None else None
        key = o.attrs.get("key")
        if node is None or not key:
            continue
        out.append(Anchor(node, str(o.attrs.get("anchor") or "anchor"), str(key), _utc(o.time)))
    return out


def _median(ordered: list[float]) -> float:
    """`statistics.median` of an already sorted list (the same arithmetic)."""
    n = len(ordered)
    i = n // 2
    return ordered[i] if n % 2 else (ordered[i - 1] + ordered[i]) / 2


def estimate(anchors: Iterable[Anchor], tolerance: float) -> ClockEstimate:
    """Offsets (seconds a node's clock reads ahead) to correct, with notes; see the module doc."""
    groups: dict[tuple[str, str], dict[str, datetime]] = defaultdict(dict)
    for a in anchors:
        seen = groups[(a.anchor, a.key)]
        if a.node not in seen or a.time < seen[a.node]:
            seen[a.node] = a.time
    rank = {a: i for i, a in enumerate(ANCHOR_LABELS)}  # ties: a step launch before NCCL init
    usable = sorted(
        ((g, t) for g, t in groups.items() if len(t) >= 2),
        key=lambda gt: (-len(gt[1]), rank.get(gt[0][0], len(rank)), min(gt[1].values()), gt[0]),
    )
    est = ClockEstimate(groups=len(usable))
    per_node: dict[str, list[tuple[float, tuple[str, str], int]]] = defaultdict(list)
    # each node's offsets so far, kept sorted: its median is read in every later group it is
    # in (1,024 nodes x many communicators), not sorted again for each
    ordered: dict[str, list[float]] = defaultdict(list)
    for g, times in usable:
        known = [n for n in times if ordered[n]]
        if known:
            ref = statistics.median(times[n].timestamp() - _median(ordered[n]) for n in known)
        else:
            ref = statistics.median(t.timestamp() for t in times.values())
        for n, t in times.items():
            per_node[n].append((t.timestamp() - ref, g, len(times)))
            bisect.insort(ordered[n], t.timestamp() - ref)
    for node in sorted(per_node):
        seen = per_node[node]
        offs = [o for o, _, _ in seen]
        off = statistics.median(offs)
        if max(offs) - min(offs) > tolerance:
            lo = min(seen, key=lambda s: s[0])
            hi = max(seen, key=lambda s: s[0])
            est.notes.append(
                f"{node}'s clock is not corrected: its anchors disagree ({_label(*hi[1])} says "
                f"{_secs(hi[0])} s, {_label(*lo[1])} says {_secs(lo[0])} s; more than the "
                f"{_secs(tolerance)} s skew tolerance apart): its times are read as logged"
            )
            continue
        if abs(off) <= tolerance:
            continue
        _, g, size = seen[0]  # the widest group it is in (groups come widest first)
        where = f"{_label(*g)}, {size} nodes"
        if len(seen) > 1:
            where += f"; {len(seen) - 1} more anchor(s)"
        est.offsets[node] = off
        side = "ahead of" if off > 0 else "behind"
        est.notes.append(
            f"{node}'s clock reads {_secs(abs(off))} s {side} the others ({where}): its times "
            f"are corrected by {'-' if off > 0 else '+'}{_secs(abs(off))} s (chain and evidence "
            "times are corrected; the quoted lines keep the time they were logged with)"
        )
    return est


def apply(
    observations: list[Observation], offsets: dict[str, float], resolve: Resolve
) -> list[Observation]:
    """Observations with the times each node's clock stamped shifted by -offset."""
    if not offsets:
        return observations
    out: list[Observation] = []
    for o in observations:
        node = clock_node(o)
        node = resolve(node) if node is not None else None
        off = offsets.get(node) if node is not None else None
        if not off:
            out.append(o)
            continue
        shift = timedelta(seconds=-off)
        update: dict[str, datetime] = {}
        if o.time is not None and o.time_quality != "unknown":
            update["time"] = o.time + shift
        if o.time_latest is not None:  # the next timed line of the same file: same clock
            update["time_latest"] = o.time_latest + shift
        if o.time_last is not None:  # a repeated fact's last line: same clock
            update["time_last"] = o.time_last + shift
        if not update:
            out.append(o)
            continue
        out.append(o.model_copy(update=update))
    return out

"""The engine's working values: a classified observation (`Item`) and a candidate cause (`Cand`).

Every step of the engine reads and writes these two. They live apart from the steps so each
step module (intake, candidates, peers, timing, progress, outcome) depends on the values, not
on another step. Times are intervals: an untimed line was written somewhere between the
previous timed line of its file and the next one, so each value carries `lo` and `hi`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine.rulebook import (
    TEMPLATE_FIELD,
    TEMPLATE_NAMES,
    Rule,
    field_value,
)

SCHEDULER_NODE = "(scheduler)"  # node of the synthesized job_state observation
FAR_PAST = datetime.min.replace(tzinfo=timezone.utc)
FAR_FUTURE = datetime.max.replace(tzinfo=timezone.utc)

# the engine's rule lookup for one job (GPU model and state already bound)
Classify = Callable[[Observation], Rule | None]


def utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def hms(t: datetime | None) -> str:
    return t.strftime("%H:%M:%SZ") if t is not None else "unknown time"


def secs(a: datetime, b: datetime) -> float:
    return (a - b).total_seconds()


def _gpu_ref(obs: Observation) -> str:
    if obs.pci:
        return f"GPU {obs.pci}"
    if obs.gpu is not None:
        return f"GPU {obs.gpu}"
    device = obs.attrs.get("device")
    if isinstance(device, str) and device.startswith(("GPU-", "MIG-")):  # device plugin UUID
        return device
    return "GPU (unidentified)"


def render(template: str, obs: Observation) -> str:
    """Fill `{field}` / `{attrs.name|fallback}` from an observation; absent -> fallback."""

    def value_of(name: str) -> Any:
        if name == "gpu_ref":
            return _gpu_ref(obs)
        if name == "time":
            return hms(utc(obs.time)) if obs.time_quality != "unknown" else None
        return field_value(obs, name)

    def one(m: Any) -> str:
        # {a|b|literal}: the first present field among the alternatives, else the literal
        name, fallback = m.group(1), m.group(2)
        value = value_of(name)
        alternatives = fallback.split("|") if fallback is not None else []
        while (value is None or value == "") and alternatives:
            alt = alternatives.pop(0)
            if alt in TEMPLATE_NAMES or alt.startswith("attrs."):
                value = value_of(alt)
            else:
                value = alt
        if value is None:
            return "unknown"
        return str(value)

    return TEMPLATE_FIELD.sub(one, template).strip()


@dataclass
class Item:
    """One classified observation, with the interval its line was written in."""

    obs: Observation
    rule: Rule
    t: datetime | None  # None when the time is unknown; else the earliest possible time
    tolerance: float  # extra timing slack (metrics are scraped, not logged)
    lo: datetime = FAR_PAST  # earliest possible time (the analysis window start if unknown)
    hi: datetime = FAR_FUTURE  # latest possible time (exact: t; untimed: next timed line/end)

    @property
    def summary(self) -> str:
        return render(self.rule.summary, self.obs)

    @property
    def exact(self) -> bool:
        """The line carried its own time. An inherited time is only a lower bound: the line
        was written at or after the timed line it borrowed from."""
        return self.t is not None and self.obs.time_quality == "exact"


@dataclass
class Cand:
    """A candidate root cause: cause items of one category on one node (or job-wide, or
    shared by many nodes at once), with the score the timing steps give it."""

    category: str
    scope: str  # node | job | shared
    items: list[Item]
    nodes: list[str]  # suspect nodes (empty for shared and non-locating job-wide rules)
    affected: list[str]  # nodes with an observation
    label: str | None = None  # shared: "switch", "storage"
    score: float = 0.0
    absorbed: list[Cand] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    demoted: str | None = None  # why: cleared before the failure, teardown after a cancel

    @property
    def rule(self) -> Rule:
        return max(self.items, key=lambda i: i.rule.weight).rule

    @property
    def lead(self) -> Item:
        """The item that best represents the candidate: strongest rule, then earliest."""
        return min(self.items, key=lambda i: (-i.rule.weight, i.t or FAR_FUTURE))

    @property
    def t(self) -> datetime | None:
        times = [i.t for i in self.items if i.t is not None]
        return min(times) if times else None

    @property
    def tolerance(self) -> float:
        return max(i.tolerance for i in self.items)

    @property
    def lo(self) -> datetime:
        """Earliest time the fault can have happened (window start when no line is timed)."""
        return min(i.lo for i in self.items)

    @property
    def hi(self) -> datetime:
        """Latest time by which the fault certainly happened (its first line was written)."""
        return min(i.hi for i in self.items)

    @property
    def exact(self) -> bool:
        """Is the earliest time an exact one (not a lower bound inherited from another line)?"""
        timed = [i for i in self.items if i.t is not None]
        return bool(timed) and min(timed, key=lambda i: (i.t, not i.exact)).exact

    @property
    def kinds(self) -> set[str]:
        return {i.obs.kind for i in self.items}

    @property
    def summary(self) -> str:
        lead = self.lead.summary
        if self.scope == "shared":
            n = len(self.affected)
            where = ""
            if self.nodes:
                ports = sorted({i.obs.port for i in self.items if i.obs.port})
                where = (
                    f"; only {', '.join(self.nodes)}"
                    + (f" (port {', '.join(ports)})" if ports else "")
                    + f": looks like their common {self.label}"
                )
            return (
                f"shared {self.label} fault: {self.category} on {n} nodes at once "
                f"({', '.join(sorted(self.kinds))}; first: {lead}){where}"
            )
        return lead


def all_items(c: Cand) -> list[Item]:
    """The candidate's own items, then those of the candidates it absorbed."""
    out = list(c.items)
    for a in c.absorbed:
        out.extend(a.items)
    return out


def home(it: Item, ctx: ExecutionContext) -> str:
    """The job node an item is about: a node its rule reads from attrs (`node_from`: the
    host a line names), else the node whose log held it."""
    for name in it.rule.node_from:
        v = field_value(it.obs, name)
        if isinstance(v, str):
            for n in ctx.nodes:
                if v == n or v.split(".")[0].lower() == n.split(".")[0].lower():
                    return n
    return it.obs.node


def without(items: list[Item], drop: list[Item]) -> list[Item]:
    """`[i for i in items if i not in drop]`, through an index: a large job compares thousands
    of items with thousands (each comparison compares observations field by field). Items
    that compare equal share kind, node, line (locator) and time, so only those are
    compared."""
    if not drop:
        return list(items)
    index: dict[tuple[Any, ...], list[Item]] = {}
    for d in drop:
        index.setdefault(_eq_key(d), []).append(d)
    return [i for i in items if not any(d is i or d == i for d in index.get(_eq_key(i), ()))]


def _eq_key(it: Item) -> tuple[Any, ...]:
    return (it.obs.kind, it.obs.node, it.obs.locator.render(), it.t)


def widest_burst(timed: list[Item], width: float) -> tuple[int, int]:
    """`timed[start:end]`: the items within `width` seconds of the first of them that cover
    the most nodes (items sorted by time; the earliest such first item; (0, 0) when none).
    One pass with a sliding window: a fault on 1,024 nodes is thousands of items, each a
    window start once, not compared with every later item."""
    if width < 0:
        return 0, 0  # no item is within a negative width of itself
    in_window: dict[str, int] = {}  # node -> its items in timed[i:j]
    best, best_at, j = 0, (0, 0), 0
    for i, first in enumerate(timed):
        assert first.t is not None
        while j < len(timed) and secs(timed[j].t, first.t) <= width:  # type: ignore[arg-type]
            node = timed[j].obs.node
            in_window[node] = in_window.get(node, 0) + 1
            j += 1
        if len(in_window) > best:
            best, best_at = len(in_window), (i, j)
        node = first.obs.node  # timed[i] leaves the window before the next start
        in_window[node] -= 1
        if not in_window[node]:
            del in_window[node]
    return best_at


def time_key(it: Item) -> tuple[datetime, str]:
    return (it.t or FAR_FUTURE, it.obs.node)

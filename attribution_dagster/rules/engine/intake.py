"""Steps 1 and 2: from a job's observations to classified causes and symptoms.

What the engine reads is decided here, once: times corrected for a node whose clock is off,
only the job's nodes and analysis window, the scheduler's final state as one more
observation, and each observation classified by the first applicable rule. The later steps
trust these lists and never look at raw observations again (except liveness and progress,
which need the lines the window dropped).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.engine import clocks
from attribution_dagster.rules.engine.items import (
    SCHEDULER_NODE,
    Classify,
    Item,
    render,
    utc,
)
from attribution_dagster.rules.engine.rulebook import EngineTuning, Rule, field_value

STATES_AS_EVIDENCE = {
    JobState.TIMEOUT,
    JobState.NODE_FAIL,
    JobState.OUT_OF_MEMORY,
    JobState.PREEMPTED,
    JobState.CANCELLED,
}
METRIC_ORIGINS = {"dcgm", "metric", "prometheus"}


def correct_clocks(
    ctx: ExecutionContext,
    observations: list[Observation],
    settings: AnalysisSettings,
    notes: list[str],
) -> list[Observation]:
    """Correct nodes whose clock is off by more than the skew tolerance, learned from
    lines all nodes log at one instant (clocks.py); everything after reads true times."""
    resolve = NodeIndex.of(ctx).resolve
    est = clocks.estimate(clocks.anchors_of(observations, resolve), settings.skew_seconds)
    notes.extend(est.notes)
    return clocks.apply(observations, est.offsets, resolve)


def in_scope(
    ctx: ExecutionContext,
    observations: list[Observation],
    settings: AnalysisSettings,
    notes: list[str],
) -> list[Observation]:
    """The observations on the job's nodes (short names resolved) inside the window; an
    untimed line is an interval and is dropped only when all of it lies outside."""
    window = settings.window(ctx)
    by_short = {n.split(".")[0].lower(): n for n in ctx.nodes}
    job_nodes = set(ctx.nodes)  # a 1,024-node job: membership per observation is a lookup
    kept: list[Observation] = []
    off_node: set[str] = set()
    off_time = 0
    for obs in observations:
        node = obs.node if obs.node in job_nodes else by_short.get(obs.node.split(".")[0].lower())
        if node is None:
            off_node.add(obs.node)
            continue
        t = utc(obs.time)
        if t is not None and obs.time_quality != "unknown" and not window.contains(t):
            latest = utc(obs.time_latest)
            spans = (
                obs.time_quality == "inherited"
                and t < window.start
                and (latest is None or latest >= window.start)
            )
            if not spans:
                off_time += 1
                continue
        kept.append(obs if node == obs.node else obs.model_copy(update={"node": node}))
    if off_node:
        notes.append(
            f"ignored observations from nodes outside the job: {', '.join(sorted(off_node))}"
        )
    if off_time:
        notes.append(f"ignored {off_time} observation(s) outside the analysis window")
    return kept


def job_state(ctx: ExecutionContext) -> Observation:
    """The scheduler's final state as evidence (TIMEOUT, NODE_FAIL, ... mean something)."""
    return Observation(
        kind="job_state",
        node=SCHEDULER_NODE,
        time=ctx.end,
        attrs={"state": ctx.state.value, "exit_code": ctx.exit_code},
        excerpt=f"job {ctx.job_id} ended {ctx.state.value} at {ctx.end.isoformat()}",
        source="context",
        locator=FileLine(path="context.json", field="state"),
        parser="engine.job_state",
    )


def bounds(
    obs: Observation, t: datetime | None, ctx: ExecutionContext
) -> tuple[datetime, datetime]:
    """The interval a line was written in. A timed line: its time. An untimed one: after
    the previous timed line of its file (`time`, else the job start) and before the next
    one (`time_latest`, else the job end)."""
    if t is not None and obs.time_quality == "exact":
        return t, t
    lo = t if t is not None else utc(ctx.start)
    hi = utc(obs.time_latest) or utc(ctx.end)
    assert lo is not None and hi is not None
    return lo, max(lo, hi)


def followed(
    obs: Observation, rule: Rule, kept: list[Observation], classify: Classify
) -> Rule | None:
    """The rule of the observation `obs` says it follows (`follows`: XID 45 `caused by
    previous Xid N` -> that node's XID N line, on the same GPU when both name one, logged
    no later than `obs`), or None when that line is not present."""
    assert rule.follows is not None
    code = field_value(obs, rule.follows)
    if code is None:
        return None
    t = utc(obs.time) if obs.time_quality != "unknown" else None
    for other in kept:
        if (
            other is obs
            or other.kind != obs.kind
            or other.node != obs.node
            or str(other.code) != str(code)
            or (obs.pci and other.pci and obs.pci != other.pci)
        ):
            continue
        t2 = utc(other.time) if other.time_quality != "unknown" else None
        if t is not None and t2 is not None and t2 > t:
            continue
        named = classify(other)
        if named is not None and not named.follows:
            return named
    return None


def classify_all(
    ctx: ExecutionContext,
    kept: list[Observation],
    classify: Classify,
    tuning: EngineTuning,
    notes: list[str],
) -> tuple[list[Item], list[Item]]:
    """(causes, symptoms): each observation by the first applicable rule; noise dropped,
    unclassified kinds counted in a note."""
    causes: list[Item] = []
    symptoms: list[Item] = []
    unclassified: dict[str, int] = defaultdict(int)
    # the lines an XID 45 may follow are on its node, of its kind: found through an index
    # (kept in order), not by reading the whole job for each of 8,192 GPUs' XID 45
    same: dict[tuple[str, str], list[Observation]] | None = None
    for obs in kept:
        rule = classify(obs)
        if rule is not None and rule.follows:
            if same is None:
                same = defaultdict(list)
                for o in kept:
                    same[(o.kind, o.node)].append(o)
            rule = followed(obs, rule, same[(obs.kind, obs.node)], classify) or rule
        if rule is None:
            unclassified[obs.kind] += 1
            continue
        if rule.role == "noise":
            continue
        t = utc(obs.time) if obs.time_quality != "unknown" else None
        origin = str(obs.attrs.get("origin") or "").lower()
        tol = tuning.metric_tolerance_seconds if origin in METRIC_ORIGINS else 0.0
        lo, hi = bounds(obs, t, ctx)
        if obs.time_last is not None:  # a repeated fact lasts until its last line
            hi = max(hi, utc(obs.time_last) or hi)
        (causes if rule.role == "cause" else symptoms).append(Item(obs, rule, t, tol, lo, hi))
    if unclassified:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(unclassified.items()))
        notes.append(f"no rule classified: {kinds}")
    return causes, symptoms


def repeat_notes(items: list[Item]) -> list[str]:
    """A note per `repeat` rule whose observation recurs on the same key (XID 13 on one GPC)."""
    groups: dict[tuple[str, tuple[Any, ...]], list[Item]] = defaultdict(list)
    for it in items:
        if it.rule.repeat:
            key = tuple(field_value(it.obs, f) for f in it.rule.repeat.same)
            if all(v is not None for v in key):
                groups[(it.rule.id, (it.obs.node, *key))].append(it)
    notes = []
    for its in groups.values():
        rep = its[0].rule.repeat
        assert rep is not None
        times = sum(it.obs.count for it in its)  # a folded fact counts its every line
        if times >= rep.min_count:
            notes.append(f"{render(rep.note, its[0].obs)} ({times} times on {its[0].obs.node})")
    return notes

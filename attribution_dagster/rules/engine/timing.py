"""Steps 4 and 5: score candidates by time and let them explain each other.

A cause that precedes the first symptom it explains gains; one that comes after them (a
teardown) loses; an unknown time costs a little; more lines add a small, capped bonus
(specificity over volume). Untimed lines are intervals: a cause provably precedes only when
its latest possible time is not after the symptom's earliest, and is late only when even its
earliest time is after the symptom's latest. Clock skew is tolerated throughout.
"""

from __future__ import annotations

import math
from datetime import datetime

from attribution_dagster.core.observation import Observation
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.engine.items import FAR_FUTURE, Cand, Item, hms, secs, utc
from attribution_dagster.rules.engine.rulebook import SYMPTOMS_TOKEN, EngineTuning, Rule


def downstream_of_collapse(
    causes: list[Item], symptoms: list[Item], settings: AnalysisSettings, notes: list[str]
) -> None:
    """Rules with `after_collapse: symptom`: such a cause logged after the job's collective
    collapse (a symptom whose rule has `collapse: true`: the first collective timeout,
    watchdog teardown or NCCL abort) is one more way a rank fails once the collective is
    gone, not what broke it: read as a symptom. "After" must be provable: a later line of
    the same file as a collapse line, or an earliest possible time later than a collapse
    line's latest possible time by more than the clock skew."""
    marks = [s for s in symptoms if s.rule.collapse]
    if not marks:
        return
    skew = settings.skew_seconds
    by_file: dict[str, int] = {}
    for m in marks:
        path, line = m.obs.locator.stream, m.obs.locator.position
        if line is not None and (path not in by_file or line < by_file[path]):
            by_file[path] = line
    first_hi = min(m.hi for m in marks)

    def after(it: Item) -> bool:
        path, line = it.obs.locator.stream, it.obs.locator.position
        if line is not None and path in by_file and line > by_file[path]:
            return True
        return first_hi < FAR_FUTURE and secs(it.lo, first_hi) > skew

    moved = [i for i in causes if i.rule.after_collapse == "symptom" and after(i)]
    for it in moved:
        causes.remove(it)
        symptoms.append(it)
    if moved:
        kinds = ", ".join(sorted({i.obs.kind for i in moved}))
        first = min(marks, key=lambda m: (m.hi, m.obs.locator.render()))
        notes.append(
            f"{len(moved)} error(s) ({kinds}) logged after the collective collapse "
            f"({first.summary}) read as its symptoms, not as causes"
        )


def explained_by(rule: Rule, sym: Item, cand_nodes: set[str]) -> bool:
    """Does `rule` (a cause's) explain the symptom `sym` (`@node`: on the cause's nodes)?"""
    for entry in rule.explains:
        base, _, qual = entry.partition("@")
        if base == SYMPTOMS_TOKEN or base == sym.obs.kind:
            if qual == "node" and sym.obs.node not in cand_nodes:
                continue
            return True
    return False


def score(
    c: Cand,
    symptoms: list[Item],
    settings: AnalysisSettings,
    tuning: EngineTuning,
    outlived: set[int] | frozenset[int] = frozenset(),
) -> None:
    """Rule weight, capped corroboration, unknown-time penalty, and the precede bonus or
    late penalty against the first onset symptom the cause explains."""
    rule = c.rule
    total = rule.weight
    corroboration = 2 * math.log2(len(c.items)) + 2 * (len(c.kinds) - 1)
    if c.scope == "shared":
        corroboration += 2 * math.log2(max(1, len(c.affected)))
    total += min(tuning.corroboration_cap, corroboration)
    t = c.t
    if t is None:
        total -= tuning.unknown_time_penalty
        c.notes.append(f"{c.category}: time unknown, ranked with a penalty")
    elif not rule.late_ok:
        where = set(c.affected)
        onset = [
            s
            for s in symptoms
            if s.rule.onset
            and (s.t is not None or s.hi < FAR_FUTURE)
            and explained_by(rule, s, where)
        ]
        slack = settings.skew_seconds + c.tolerance
        first_any = min((s.t for s in onset if s.t is not None), default=None)  # type: ignore[type-var]
        # symptoms training outlived do not make a later cause late (they still count
        # for the bonus of a cause that preceded them)
        first_done = min((s.hi for s in onset if id(s) not in outlived), default=None)  # type: ignore[type-var]
        if first_done is not None and secs(t, first_done) > slack:
            total -= tuning.late_penalty
            c.notes.append(
                f"{c.summary} came {secs(t, first_done):.0f} s after the first symptom "
                f"({hms(first_done)}): treated as a consequence, not the cause"
            )
        elif first_any is not None and secs(c.hi, first_any) <= slack:
            total += tuning.precede_bonus
    c.score = round(total, 2)


def recovered(
    c: Cand,
    symptoms: list[Item],
    recoveries: list[Observation],
    settings: AnalysisSettings,
    tuning: EngineTuning,
) -> None:
    """A storage outage that cleared (`nfs: server X OK`, Lustre `Connection restored`) on
    every node it hit, well before the failure onset, was a transient blip: the job kept
    running through it. Demote it so it neither wins nor explains the real cause."""
    if not c.items or any(i.rule.recovered_by is None or i.t is None for i in c.items):
        return
    where, rule = set(c.affected), c.rule  # c.rule reads every item: once, not per symptom
    onset = [
        s.t for s in symptoms if s.rule.onset and s.t is not None and explained_by(rule, s, where)
    ]
    if not onset:
        return
    deadline = min(onset)  # type: ignore[type-var]
    grace = tuning.recovery_grace_seconds + settings.skew_seconds
    last_clear: datetime | None = None
    on_node: dict[str, list[Observation]] = {}  # an outage on 1,024 nodes: each its own
    for o in recoveries:
        on_node.setdefault(o.node, []).append(o)
    for it in c.items:
        rb = it.rule.recovered_by
        assert rb is not None and it.t is not None
        clears = [
            t
            for o in on_node.get(it.obs.node, ())
            if rb.test(o)
            and (t := utc(o.time)) is not None
            and t >= it.t
            and secs(deadline, t) >= grace
        ]
        if not clears:
            return
        first = min(clears)
        last_clear = first if last_clear is None or first > last_clear else last_clear
    assert last_clear is not None
    c.score = round(c.score - tuning.late_penalty, 2)
    c.demoted = (
        f"cleared by {hms(last_clear)}, {secs(deadline, last_clear):.0f} s before the "
        f"failure onset ({hms(deadline)}): a transient blip, not the cause"
    )
    c.notes.append(f"{c.summary} {c.demoted}")


def after_end(cands: list[Cand], settings: AnalysisSettings, tuning: EngineTuning) -> None:
    """A terminal cause (the job was cancelled) ends the job: a cause logged at or after it
    (within clock skew) is teardown, e.g. a segfault while the ranks are being killed."""
    # only an exact time: an inherited one is a lower bound, the cancel may be much later
    ends = [i.t for c in cands for i in c.items if i.rule.terminal and i.exact]
    if not ends:
        return
    end = min(ends)  # type: ignore[type-var]
    for c in cands:
        if c.t is None or c.rule.late_ok or any(i.rule.terminal for i in c.items):
            continue
        if secs(c.t, end) >= -settings.skew_seconds:
            c.score = round(c.score - tuning.late_penalty, 2)
            c.demoted = (
                f"came at {hms(c.t)}, with or after the cancel at {hms(end)}: "
                "teardown, not the cause"
            )
            c.notes.append(f"{c.summary} {c.demoted}")


def relates(a: Cand, b: Cand) -> bool:
    """Does candidate `a` explain candidate `b` (ignoring time)?"""
    a_nodes, b_nodes = set(a.affected), set(b.affected)

    def hit(
        entries: list[str],
        target: Cand,
        kinds: set[str],
        other_nodes: set[str],
        target_nodes: set[str],
    ) -> bool:
        for entry in entries:
            base, _, qual = entry.partition("@")
            if base == target.category or base in kinds:
                if qual == "node" and not (other_nodes & target_nodes):
                    continue
                return True
        return False

    explains = [
        e for i in a.items for e in i.rule.explains if e.partition("@")[0] != SYMPTOMS_TOKEN
    ]
    yields = [e for i in b.items for e in i.rule.yields_to]
    # `a` explains `b` when it explains what makes `b` a candidate (its lead line): a fault
    # of its own on another node (an XID there) is not explained away by the symptoms it
    # shares with `a` (an NCCL NVLink error both ranks print)
    return hit(explains, b, {b.lead.obs.kind}, a_nodes, b_nodes) or hit(
        yields, a, a.kinds, b_nodes, a_nodes
    )


def absorb(cands: list[Cand], settings: AnalysisSettings) -> list[Cand]:
    """Fold candidates explained by an earlier (or skew-simultaneous) stronger one."""
    alive = list(cands)
    for b in sorted(cands, key=lambda c: c.score):
        for a in sorted(alive, key=lambda c: -c.score):
            if a is b or b not in alive or a.demoted:
                continue
            if not relates(a, b):
                continue
            # `a` must be able to have happened first: its earliest possible time (the
            # window start for a line in a file without timed lines) no later than `b`'s
            # latest possible time.
            slack = settings.skew_seconds + max(a.tolerance, b.tolerance)
            if secs(a.lo, b.hi) > slack:
                continue
            if relates(b, a) and b.score > a.score:
                continue
            a.absorbed.append(b)
            a.absorbed.extend(b.absorbed)
            b.absorbed = []
            alive.remove(b)
            break
    return alive


def earliest_bonus(roots: list[Cand], settings: AnalysisSettings, tuning: EngineTuning) -> None:
    """The clearly earliest timed root (beyond skew) gets a small bonus."""
    timed = sorted((c for c in roots if c.t is not None), key=lambda c: c.t)  # type: ignore[arg-type,return-value]
    if len(timed) >= 2 and timed[0].t is not None and timed[1].t is not None:
        if secs(timed[1].t, timed[0].t) > settings.skew_seconds + timed[0].tolerance:
            timed[0].score += tuning.earliest_bonus

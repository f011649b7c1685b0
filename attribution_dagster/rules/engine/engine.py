"""The rule engine: root cause vs downstream symptoms for one job.

    engine = load_engine()                       # validates rules.yaml
    result = engine.attribute(ctx, observations, coverage, settings)

Steps (each visible in `attribute`):

1. correct the times of a node whose clock is off, learned from lines all nodes log at one
   instant (clocks.py); keep observations on the job's nodes inside [start - lead, end + lag];
   add the scheduler's final state as a `job_state` observation;
2. classify each by the first applicable rule (file order = precedence): cause, symptom, noise;
3. group causes into candidates by (category, node), or by category for job-wide rules, and
   fold the same fault on many nodes at once into one *shared* candidate (switch, storage);
4. score: rule weight, + bonus when the cause precedes the first symptom it explains
   (clock skew tolerated), - penalty when it comes after them (teardown), - penalty for an
   unknown time, + a small, capped corroboration bonus (specificity over volume);
5. let candidates explain each other (an XID 79 explains later IB retry errors; an earlier
   infrastructure fault outranks a TIMEOUT state), then decide attributed / ambiguous /
   unattributed, and build a time-ordered symptom chain with evidence.

Run `python -m attribution_dagster.rules.engine.engine --markdown > docs/rules.md` for the catalog.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import (
    CATEGORIES,
    AttributionResult,
    Candidate,
    ChainLink,
    Evidence,
    Suspect,
)
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.engine import clocks
from attribution_dagster.rules.engine.liveness import (
    converge,
    last_seen,
    latest,
    latest_time,
    learn_addresses,
    learn_ranks,
    lone_failed_exit,
    peer_node,
    silent,
)
from attribution_dagster.rules.engine.rulebook import (
    SYMPTOMS_TOKEN,
    TEMPLATE_FIELD,
    TEMPLATE_NAMES,
    Rule,
    Rulebook,
    RulebookError,
    field_value,
    load_rulebook,
)

__all__ = ["RuleEngine", "RulebookError", "load_engine", "render_markdown", "DEFAULT_RULES"]

DEFAULT_RULES = Path(__file__).parent.parent / "rules.yaml"
SCHEDULER_NODE = "(scheduler)"  # node of the synthesized job_state observation
STATES_AS_EVIDENCE = {
    JobState.TIMEOUT,
    JobState.NODE_FAIL,
    JobState.OUT_OF_MEMORY,
    JobState.PREEMPTED,
    JobState.CANCELLED,
}
METRIC_ORIGINS = {"dcgm", "metric", "prometheus"}
# a node that logged one of these itself saw its workload end: its silence is no vanishing
ENDING_KINDS = {
    "traceback",
    "child_failed",
    "process_exit",
    "segfault",
    "cuda_oom",
    "cuda_error",
    "watchdog_failure",
    "collective_timeout",
    "nccl_remote_error",
    "nccl_abort",
    "slurm_cancelled",
}
# a node reporting these complains of a remote failure itself (it is not the one that went away)
PEER_KINDS = {"nccl_remote_error", "peer_lost", "ib_completion_error"}
KIND_LABELS = {
    "collective_timeout": "NCCL timeouts",
    "watchdog_failure": "NCCL watchdog teardowns",
    "nccl_remote_error": "NCCL remote errors",
    "nccl_system_error": "NCCL system errors",
    "nccl_abort": "NCCL aborts",
    "ib_completion_error": "IB completion errors",
    "peer_lost": "lost peer connections",
    "child_failed": "torchrun child failures",
    "process_exit": "task exits",
    "traceback": "tracebacks",
}


def _utc(t: datetime | None) -> datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=timezone.utc) if t.tzinfo is None else t.astimezone(timezone.utc)


def _hms(t: datetime | None) -> str:
    return t.strftime("%H:%M:%SZ") if t is not None else "unknown time"


def _secs(a: datetime, b: datetime) -> float:
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
            return _hms(_utc(obs.time)) if obs.time_quality != "unknown" else None
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


_FAR_PAST = datetime.min.replace(tzinfo=timezone.utc)
_FAR_FUTURE = datetime.max.replace(tzinfo=timezone.utc)


@dataclass
class Item:
    """One classified observation, with the interval its line was written in."""

    obs: Observation
    rule: Rule
    t: datetime | None  # None when the time is unknown; else the earliest possible time
    tolerance: float  # extra timing slack (metrics are scraped, not logged)
    lo: datetime = _FAR_PAST  # earliest possible time (the analysis window start if unknown)
    hi: datetime = _FAR_FUTURE  # latest possible time (exact: t; untimed: next timed line/end)

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
        far = datetime.max.replace(tzinfo=timezone.utc)
        return min(self.items, key=lambda i: (-i.rule.weight, i.t or far))

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


class RuleEngine:
    """Applies a validated rule catalog to one job's observations."""

    def __init__(self, rulebook: Rulebook, blob: bytes, path: Path | None = None) -> None:
        self.rulebook = rulebook
        self.rules = rulebook.rules
        self.tuning = rulebook.engine
        self.path = path
        self.rules_version = f"{rulebook.version}+{hashlib.sha256(blob).hexdigest()[:8]}"

    # ---- classification -------------------------------------------------------------

    def classify(
        self, obs: Observation, gpu_model: str | None = None, state: JobState | None = None
    ) -> Rule | None:
        """The first applicable rule matching `obs` (rules are in precedence order)."""
        for rule in self.rules:
            if rule.match.test(obs) and rule.applies(gpu_model, state):
                return rule
        return None

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for r in self.rules:
            match: dict[str, Any] = {"kind": list(r.match.kinds)}
            for k, p in r.match.where.items():
                match[k] = p.model_dump(by_alias=True, exclude_defaults=True)
                if "eq" in match[k]:
                    match[k] = match[k]["eq"]
            out.append(
                {
                    "id": r.id,
                    "description": r.description,
                    "role": r.role,
                    "category": r.category,
                    "weight": r.weight,
                    "match": match,
                    "gpu_models": r.gpu_models,
                    "states": [s.value for s in r.states] if r.states else None,
                    "scope": r.scope,
                    "shared": r.shared.model_dump() if r.shared else None,
                    "explains": r.explains if r.role == "cause" else [],
                    "yields_to": r.yields_to,
                    "recovered_by": list(r.recovered_by.kinds) if r.recovered_by else [],
                    "terminal": r.terminal,
                    "rivals": r.rivals,
                    "follows": r.follows,
                    "collapse": r.collapse,
                    "after_collapse": r.after_collapse,
                    "fallback": r.fallback,
                    "summary": r.summary,
                    "remediation": r.remediation,
                    "example": r.example.model_dump(exclude_defaults=True, mode="json"),
                }
            )
        return out

    # ---- the analysis ---------------------------------------------------------------

    def attribute(
        self,
        ctx: ExecutionContext,
        observations: list[Observation],
        coverage: list[SourceCoverage],
        settings: AnalysisSettings | None = None,
    ) -> AttributionResult:
        settings = settings or AnalysisSettings()
        notes: list[str] = []
        observations = self._clocks(ctx, observations, settings, notes)
        kept = self._in_scope(ctx, observations, settings, notes)
        if ctx.state in STATES_AS_EVIDENCE:
            kept.append(self._job_state(ctx))

        causes: list[Item] = []
        symptoms: list[Item] = []
        unclassified: dict[str, int] = defaultdict(int)
        for obs in kept:
            rule = self.classify(obs, ctx.gpu_model, ctx.state)
            if rule is not None and rule.follows:
                rule = self._followed(obs, rule, kept, ctx) or rule
            if rule is None:
                unclassified[obs.kind] += 1
                continue
            if rule.role == "noise":
                continue
            t = _utc(obs.time) if obs.time_quality != "unknown" else None
            origin = str(obs.attrs.get("origin") or "").lower()
            tol = self.tuning.metric_tolerance_seconds if origin in METRIC_ORIGINS else 0.0
            lo, hi = self._bounds(obs, t, ctx)
            if obs.time_last is not None:  # a repeated fact lasts until its last line
                hi = max(hi, _utc(obs.time_last) or hi)
            (causes if rule.role == "cause" else symptoms).append(Item(obs, rule, t, tol, lo, hi))
        if unclassified:
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(unclassified.items()))
            notes.append(f"no rule classified: {kinds}")
        notes.extend(self._repeat_notes(causes + symptoms))
        self._downstream_of_collapse(causes, symptoms, settings, notes)
        pointed = self._peers_and_silence(ctx, observations, causes, symptoms, notes)

        base = dict(
            job_id=ctx.job_id,
            failed=ctx.failed,
            rules_version=self.rules_version,
            cluster=ctx.cluster,
            state=ctx.state.value,
            coverage=list(coverage),
        )
        if not ctx.failed:
            return self._not_failed(ctx, causes, symptoms, coverage, notes, base)

        cands = self._candidates(ctx, causes, settings)
        if any(not c.rule.fallback for c in cands):
            cands = [c for c in cands if not c.rule.fallback]
        recovery_kinds = {k for r in self.rules if r.recovered_by for k in r.recovered_by.kinds}
        recoveries = [
            o
            for o in kept
            if o.kind in recovery_kinds and o.time is not None and o.time_quality != "unknown"
        ]
        progress = self._last_progress(observations, ctx)
        if progress:
            notes.append(self._progress_note(progress))
        # a symptom after which training went on for minutes (a crash torchrun restarted
        # from) did not mark the failure: a cause after it is not late for that
        outlived = {id(s) for s in symptoms if self._outlived(s, progress)}
        onsets = [s for s in symptoms if id(s) not in outlived]
        for c in cands:
            self._score(c, symptoms, settings, outlived)
            self._recovered(c, onsets, recoveries, settings)
            self._progressed(c, progress)
        self._after_end(cands, settings)
        roots = self._absorb(cands, settings)
        self._earliest_bonus(roots, settings)
        roots.sort(key=lambda c: -c.score)

        tn = self.tuning
        timed = [c for c in roots if c.t is not None and c.score >= tn.min_score]
        contenders = [c for c in roots if c.t is not None] if timed else roots
        sidelined = [c for c in roots if c not in contenders]
        for c in sidelined:
            notes.append(f"not ranked (unknown time, timed causes exist): {c.summary}")

        if not contenders or contenders[0].score < tn.min_score:
            if contenders:
                best = contenders[0]
                notes.append(
                    f"strongest candidate too weak to attribute ({best.category}, "
                    f"score {best.score:.0f} < {tn.min_score:.0f}): {best.summary}"
                )
            return self._unattributed(ctx, roots, symptoms, coverage, notes, base, pointed)

        top = contenders[0]
        rivals = [
            c
            for c in contenders[1:]
            if c.score >= tn.ambiguity_margin * top.score
            and (c.category != top.category or set(c.nodes) != set(top.nodes))
        ]
        if rivals:
            # the same fault on several nodes at once (two GPUs lost in one rack power event,
            # ECC errors on two nodes) leaves the category in no doubt, only where to look:
            # same-category contenders become one candidate whose suspects are all those nodes
            groups: dict[str, list[Cand]] = {}
            for c in (top, *rivals):
                groups.setdefault(c.category, []).append(c)
            if any(len(g) > 1 for g in groups.values()):
                merged = {id(c) for c in (top, *rivals)}
                heads = [self._merge(g) for g in groups.values()]
                roots = heads + [c for c in roots if id(c) not in merged]
                top, rivals = heads[0], heads[1:]
        if rivals:
            return self._ambiguous(ctx, [top, *rivals], roots, symptoms, coverage, notes, base)
        stall = self._stall_note(top, progress, ctx)
        if stall:
            notes.insert(0, stall)
        return self._attributed(ctx, top, roots, symptoms, coverage, notes, base)

    def _stall_note(
        self, top: Cand, progress: dict[str, Observation], ctx: ExecutionContext
    ) -> str | None:
        """Name the stall: where training progress stopped relative to the cause."""
        if not progress or top.rule.late_ok or top.t is None:
            return None
        last = max(progress.values(), key=lambda o: _utc(o.time))  # type: ignore[arg-type,return-value]
        t_last = _utc(last.time)
        assert t_last is not None
        step = last.attrs.get("step")
        what = f"step {step} " if step is not None else ""
        gap = _secs(t_last, top.t)
        if gap > self.tuning.progress_grace_seconds:
            return None
        tail = (
            f"; the job then sat until it ended {ctx.state.value} at {_hms(_utc(ctx.end))}"
            if ctx.state is JobState.TIMEOUT
            else ""
        )
        when = f"{-gap:.0f} s before" if gap <= 0 else f"{gap:.0f} s after"
        return (
            f"training stalled: the last progress line ({what}on {last.node}) was logged at "
            f"{_hms(t_last)}, {when} the fault{tail}"
        )

    def _peers_and_silence(
        self,
        ctx: ExecutionContext,
        observations: list[Observation],
        causes: list[Item],
        symptoms: list[Item],
        notes: list[str],
    ) -> str | None:
        """Peer blame and silent nodes (issue 9). Errors that name a remote peer are symptoms
        about it; when most reporters name one node, network errors about that node stop being
        a fabric cause, and that node's own evidence decides. A node whose logs stop well
        before the others' becomes a `node_silent` cause when something corroborates it (the
        peers point at it, the scheduler named or failed it). Returns the node the peers point
        at (named as where to look even when nothing explains the failure)."""
        index = learn_addresses(ctx, observations)
        ranks = learn_ranks(ctx, observations)
        named: dict[str, set[str]] = defaultdict(set)
        about: dict[int, str] = {}
        for it in causes + symptoms:
            target = peer_node(it.obs, index, ranks)
            if target is not None and target != it.obs.node and it.obs.node in ctx.nodes:
                named[target].add(it.obs.node)
                about[id(it)] = target
        complaining = {
            i.obs.node
            for i in causes + symptoms
            if i.obs.kind in PEER_KINDS or id(i) in about
        }
        conv = converge(dict(named), len(ctx.nodes), complaining)
        if conv.why:
            notes.append(conv.why)
        pointed = conv.suspect
        if pointed is not None:
            moved = [i for i in causes if i.rule.about_peer and about.get(id(i)) == pointed]
            for it in moved:
                causes.remove(it)
                symptoms.append(it)
            if moved:
                notes.append(
                    f"{len(moved)} network error(s) toward {pointed} read as symptoms of what "
                    f"happened to {pointed}, not as a fabric fault"
                )
        # silence: corroborated by the peers, by a scheduler line naming the node, or NODE_FAIL
        seen = last_seen(observations, ctx.nodes)
        gap = self.tuning.silence_seconds
        named_down = [  # a scheduler / kernel line that says the node went away
            self._home(i, ctx)
            for i in causes
            if i.rule.category == "node.down" and i.rule.locates and i.rule.weight >= 70
        ]
        # a node that wrote its own workload's end (a traceback, torchrun's failure summary, an
        # exit, a timeout it waited into) was alive when its logs stopped: it did not vanish
        ended = {
            i.obs.node
            for i in causes + symptoms
            if i.obs.kind in ENDING_KINDS and "logged_on" not in i.obs.attrs
        }
        targets = list(dict.fromkeys(([pointed] if pointed else []) + named_down))
        targets = [n for n in targets if n not in ended]
        found = [(n, tail) for n in targets if (tail := silent(n, seen, ctx.end, gap))]
        if not found and ctx.state is JobState.NODE_FAIL:
            quiet = [
                (n, tail)
                for n in ctx.nodes
                if n not in ended and (tail := silent(n, seen, ctx.end, gap))
            ]
            if len(quiet) == 1:
                found = quiet
        for node, tail in found:
            others = sorted(
                _utc(o.time)  # type: ignore[type-var]
                for n in seen
                if n != node and (o := latest(seen, n)) is not None
            )
            interval = tail.time_quality != "exact" and tail.time_latest is not None
            obs = Observation(
                kind="node_silent",
                node=node,
                time=tail.time,
                time_quality=tail.time_quality if interval else "exact",
                time_latest=tail.time_latest if interval else None,
                excerpt=tail.excerpt,
                source=tail.source,
                locator=tail.locator,
                parser="engine.silence",
                attrs={
                    "others_until": _hms(others[len(others) // 2]) if others else None,
                    "stream": tail.attrs.get("stream"),
                },
            )
            rule = self.classify(obs, ctx.gpu_model, ctx.state)
            if rule is None or rule.role != "cause":
                continue
            t, t_hi = _utc(tail.time), latest_time(tail)
            assert t is not None
            causes.append(Item(obs, rule, t, 0.0, t, t_hi))
            when = _hms(t) if t_hi == t else f"{_hms(t)}..{_hms(t_hi)}"
            notes.append(
                f"{node} stopped writing at {when} while the other nodes went on "
                f"(median last line {obs.attrs['others_until']})"
            )
        return pointed

    def _followed(
        self, obs: Observation, rule: Rule, kept: list[Observation], ctx: ExecutionContext
    ) -> Rule | None:
        """The rule of the observation `obs` says it follows (`follows`: XID 45 `caused by
        previous Xid N` -> that node's XID N line, on the same GPU when both name one, logged
        no later than `obs`), or None when that line is not present."""
        assert rule.follows is not None
        code = field_value(obs, rule.follows)
        if code is None:
            return None
        t = _utc(obs.time) if obs.time_quality != "unknown" else None
        for other in kept:
            if (
                other is obs
                or other.kind != obs.kind
                or other.node != obs.node
                or str(other.code) != str(code)
                or (obs.pci and other.pci and obs.pci != other.pci)
            ):
                continue
            t2 = _utc(other.time) if other.time_quality != "unknown" else None
            if t is not None and t2 is not None and t2 > t:
                continue
            named = self.classify(other, ctx.gpu_model, ctx.state)
            if named is not None and not named.follows:
                return named
        return None

    @staticmethod
    def _downstream_of_collapse(
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
            return first_hi < _FAR_FUTURE and _secs(it.lo, first_hi) > skew

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

    @staticmethod
    def _bounds(
        obs: Observation, t: datetime | None, ctx: ExecutionContext
    ) -> tuple[datetime, datetime]:
        """The interval a line was written in. A timed line: its time. An untimed one: after
        the previous timed line of its file (`time`, else the job start) and before the next
        one (`time_latest`, else the job end)."""
        if t is not None and obs.time_quality == "exact":
            return t, t
        lo = t if t is not None else _utc(ctx.start)
        hi = _utc(obs.time_latest) or _utc(ctx.end)
        assert lo is not None and hi is not None
        return lo, max(lo, hi)

    @staticmethod
    def _merge(cands: list[Cand]) -> Cand:
        """One candidate from same-category candidates on different nodes (best first)."""
        best = cands[0]
        if len(cands) == 1:
            return best
        merged = Cand(
            category=best.category,
            scope=best.scope,
            items=[i for c in cands for i in c.items],
            nodes=list(dict.fromkeys(n for c in cands for n in c.nodes)),
            affected=list(dict.fromkeys(n for c in cands for n in c.affected)),
            label=best.label,
            score=best.score,
            absorbed=[a for c in cands for a in c.absorbed],
            notes=[n for c in cands for n in c.notes],
        )
        merged.notes.append(
            f"{best.category} on {len(merged.nodes)} nodes within clock skew: "
            + ", ".join(merged.nodes)
        )
        return merged

    # ---- steps ----------------------------------------------------------------------

    @staticmethod
    def _clocks(
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

    def _in_scope(
        self,
        ctx: ExecutionContext,
        observations: list[Observation],
        settings: AnalysisSettings,
        notes: list[str],
    ) -> list[Observation]:
        window = settings.window(ctx)
        by_short = {n.split(".")[0].lower(): n for n in ctx.nodes}
        kept: list[Observation] = []
        off_node: set[str] = set()
        off_time = 0
        for obs in observations:
            node = (
                obs.node if obs.node in ctx.nodes else by_short.get(obs.node.split(".")[0].lower())
            )
            if node is None:
                off_node.add(obs.node)
                continue
            t = _utc(obs.time)
            if t is not None and obs.time_quality != "unknown" and not window.contains(t):
                # an untimed line is an interval: out only when all of it lies outside
                latest = _utc(obs.time_latest)
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

    @staticmethod
    def _job_state(ctx: ExecutionContext) -> Observation:
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

    def _repeat_notes(self, items: list[Item]) -> list[str]:
        groups: dict[tuple[str, tuple[Any, ...]], list[Item]] = defaultdict(list)
        for it in items:
            if it.rule.repeat:
                key = tuple(field_value(it.obs, f) for f in it.rule.repeat.same)
                if all(v is not None for v in key):
                    groups[(it.rule.id, (it.obs.node, *key))].append(it)
        notes = []
        for (_, _), its in groups.items():
            rep = its[0].rule.repeat
            assert rep is not None
            times = sum(it.obs.count for it in its)
            if times >= rep.min_count:
                notes.append(
                    f"{render(rep.note, its[0].obs)} ({times} times on {its[0].obs.node})"
                )
        return notes

    def _home(self, it: Item, ctx: ExecutionContext) -> str:
        for name in it.rule.node_from:
            v = field_value(it.obs, name)
            if isinstance(v, str):
                for n in ctx.nodes:
                    if v == n or v.split(".")[0].lower() == n.split(".")[0].lower():
                        return n
        return it.obs.node

    def _candidates(
        self, ctx: ExecutionContext, causes: list[Item], settings: AnalysisSettings
    ) -> list[Cand]:
        cands: list[Cand] = []
        rest = list(causes)
        # shared faults first: the same (category, kind) on many nodes within seconds
        shareable: dict[tuple[str, str], list[Item]] = defaultdict(list)
        for it in rest:
            if it.rule.shared is not None:
                shareable[(it.rule.category or "", it.obs.kind)].append(it)
        for (category, _kind), its in shareable.items():
            spec = its[0].rule.shared
            assert spec is not None
            width = (
                spec.within_seconds if spec.within_seconds is not None else settings.skew_seconds
            )
            width += max(i.tolerance for i in its)
            timed = sorted((i for i in its if i.t is not None), key=lambda i: i.t)  # type: ignore[arg-type,return-value]
            best: set[str] = set()
            for i, first in enumerate(timed):
                assert first.t is not None
                nodes = {
                    x.obs.node
                    for x in timed[i:]
                    if x.t is not None and _secs(x.t, first.t) <= width
                }
                if len(nodes) > len(best):
                    best = nodes
            n = len(best)
            if n >= spec.min_nodes and (
                (spec.enough_nodes is not None and n >= spec.enough_nodes)
                or n / len(ctx.nodes) >= spec.min_share
            ):
                members = [i for i in its if i.obs.node in best]
                rest = [i for i in rest if i not in members]
                subset = len(best) < len(set(ctx.nodes))
                cands.append(
                    Cand(
                        category=category,
                        scope="shared",
                        items=members,
                        nodes=sorted(best) if spec.name_nodes and subset else [],
                        affected=sorted(best),
                        label=spec.label,
                        notes=[
                            f"shared {spec.label}: {category} on {n} of {len(ctx.nodes)} nodes "
                            f"within {width:.0f} s: {', '.join(sorted(best))}"
                        ],
                    )
                )
        groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
        for it in rest:
            home = "*job*" if it.rule.scope == "job" else self._home(it, ctx)
            groups[(it.rule.category or "", home)].append(it)
            for rival in it.rule.rivals:  # the line fits these categories as well
                groups[(rival, home)].append(it)
        for (category, home), its in groups.items():
            affected = sorted({self._home(i, ctx) for i in its} - {SCHEDULER_NODE})
            located = sorted({self._home(i, ctx) for i in its if i.rule.locates} - {SCHEDULER_NODE})
            cands.append(
                Cand(
                    category=category,
                    scope="job" if home == "*job*" else "node",
                    items=its,
                    nodes=located,
                    affected=affected,
                )
            )
        return cands

    @staticmethod
    def _explained_by(rule: Rule, sym: Item, cand_nodes: set[str]) -> bool:
        for entry in rule.explains:
            base, _, qual = entry.partition("@")
            if base == SYMPTOMS_TOKEN or base == sym.obs.kind:
                if qual == "node" and sym.obs.node not in cand_nodes:
                    continue
                return True
        return False

    def _score(
        self,
        c: Cand,
        symptoms: list[Item],
        settings: AnalysisSettings,
        outlived: set[int] | frozenset[int] = frozenset(),
    ) -> None:
        tn = self.tuning
        rule = c.rule
        score = rule.weight
        n = len(c.items)
        corroboration = 2 * math.log2(n) + 2 * (len(c.kinds) - 1)
        if c.scope == "shared":
            corroboration += 2 * math.log2(max(1, len(c.affected)))
        score += min(tn.corroboration_cap, corroboration)
        t = c.t
        if t is None:
            score -= tn.unknown_time_penalty
            c.notes.append(f"{c.category}: time unknown, ranked with a penalty")
        elif not rule.late_ok:
            home = set(c.affected)
            onset = [
                s
                for s in symptoms
                if s.rule.onset
                and (s.t is not None or s.hi < _FAR_FUTURE)
                and self._explained_by(rule, s, home)
            ]
            # Untimed lines are intervals: a cause provably precedes when its latest possible
            # time is no later than the earliest possible symptom time; it is provably late
            # when even its earliest possible time is after a symptom's latest possible time.
            slack = settings.skew_seconds + c.tolerance
            first_any = min((s.t for s in onset if s.t is not None), default=None)  # type: ignore[type-var]
            # symptoms training outlived do not make a later cause late (they still count
            # for the bonus of a cause that preceded them)
            first_done = min((s.hi for s in onset if id(s) not in outlived), default=None)  # type: ignore[type-var]
            if first_done is not None and _secs(t, first_done) > slack:
                score -= tn.late_penalty
                c.notes.append(
                    f"{c.summary} came {_secs(t, first_done):.0f} s after the first symptom "
                    f"({_hms(first_done)}): treated as a consequence, not the cause"
                )
            elif first_any is not None and _secs(c.hi, first_any) <= slack:
                score += tn.precede_bonus
        c.score = round(score, 2)

    def _recovered(
        self,
        c: Cand,
        symptoms: list[Item],
        recoveries: list[Observation],
        settings: AnalysisSettings,
    ) -> None:
        """A storage outage that cleared (`nfs: server X OK`, Lustre `Connection restored`) on
        every node it hit, well before the failure onset, was a transient blip: the job kept
        running through it. Demote it so it neither wins nor explains the real cause."""
        if not c.items or any(i.rule.recovered_by is None or i.t is None for i in c.items):
            return
        home = set(c.affected)
        onset = [
            s.t
            for s in symptoms
            if s.rule.onset and s.t is not None and self._explained_by(c.rule, s, home)
        ]
        if not onset:
            return
        deadline = min(onset)  # type: ignore[type-var]
        grace = self.tuning.recovery_grace_seconds + settings.skew_seconds
        last_clear: datetime | None = None
        for it in c.items:
            rb = it.rule.recovered_by
            assert rb is not None and it.t is not None
            clears = [
                t
                for o in recoveries
                if o.node == it.obs.node
                and rb.test(o)
                and (t := _utc(o.time)) is not None
                and t >= it.t
                and _secs(deadline, t) >= grace
            ]
            if not clears:
                return
            first = min(clears)
            last_clear = first if last_clear is None or first > last_clear else last_clear
        assert last_clear is not None
        c.score = round(c.score - self.tuning.late_penalty, 2)
        c.demoted = (
            f"cleared by {_hms(last_clear)}, {_secs(deadline, last_clear):.0f} s before the "
            f"failure onset ({_hms(deadline)}): a transient blip, not the cause"
        )
        c.notes.append(f"{c.summary} {c.demoted}")

    @staticmethod
    def _last_progress(
        observations: list[Observation], ctx: ExecutionContext
    ) -> dict[str, Observation]:
        """Per node, its last training progress line (step / iteration / loss)."""
        last: dict[str, Observation] = {}
        nodes = set(ctx.nodes)
        end = _utc(ctx.end)
        for o in observations:
            if o.kind != "progress" or o.time is None or o.node not in nodes:
                continue
            if end is not None and _secs(_utc(o.time), end) > 0:  # type: ignore[arg-type]
                continue  # after the job ended: another run's output in the same file
            cur = last.get(o.node)
            if cur is None or _utc(o.time) > _utc(cur.time):  # type: ignore[operator]
                last[o.node] = o
        return last

    def _progress_note(self, progress: dict[str, Observation]) -> str:
        """Last training progress of the job, and the node that stopped first when it stopped
        clearly earlier than the others (who fell first)."""
        ordered = sorted(progress.values(), key=lambda o: _utc(o.time))  # type: ignore[arg-type,return-value]
        last, first = ordered[-1], ordered[0]
        step = last.attrs.get("step")
        note = (
            f"training progress: last logged at {_hms(_utc(last.time))} on {last.node}"
            + (f" (step {step})" if step is not None else "")
        )
        t_first, t_last = _utc(first.time), _utc(last.time)
        assert t_first is not None and t_last is not None
        if len(ordered) > 1 and _secs(t_last, t_first) >= self.tuning.silence_seconds:
            note += f"; {first.node} stopped first, at {_hms(t_first)}"
        return note

    def _outlived(self, s: Item, progress: dict[str, Observation]) -> bool:
        """Training progressed `progress_grace_seconds` after this symptom's latest possible
        time (on its node, else anywhere in the job): it was not the failure's onset."""
        if not progress or s.hi >= _FAR_FUTURE:
            return False
        mine = progress.get(s.obs.node)
        seen = [mine] if mine is not None else list(progress.values())
        t_last = max(_utc(o.time) for o in seen)  # type: ignore[type-var]
        assert t_last is not None
        return _secs(t_last, s.hi) >= self.tuning.progress_grace_seconds

    def _progressed(self, c: Cand, progress: dict[str, Observation]) -> None:
        """A fault after which training kept advancing for minutes (on the nodes it hit, else
        anywhere in the job) did not stop the job: demote it, the way a storage blip that
        cleared is demoted. Its last occurrence counts (a fault that repeats until the end
        is not excused by progress after its first one)."""
        if c.rule.late_ok or c.demoted or not progress or c.t is None:
            return
        mine = [progress[n] for n in c.affected if n in progress]
        seen = mine or list(progress.values())
        last = max(seen, key=lambda o: _utc(o.time))  # type: ignore[arg-type,return-value]
        t_last = _utc(last.time)
        fault_last = max(i.hi for i in c.items)  # provably before the progress
        assert t_last is not None
        gap = _secs(t_last, fault_last)
        if gap < self.tuning.progress_grace_seconds:
            return
        step = last.attrs.get("step")
        c.score = round(c.score - self.tuning.late_penalty, 2)
        c.demoted = (
            f"training went on for {gap / 60:.0f} min after it (last progress "
            f"{'step ' + str(step) + ' ' if step is not None else ''}on {last.node} at "
            f"{_hms(t_last)}): not what stopped the job"
        )
        c.notes.append(f"{c.summary} {c.demoted}")

    def _after_end(self, cands: list[Cand], settings: AnalysisSettings) -> None:
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
            if _secs(c.t, end) >= -settings.skew_seconds:
                c.score = round(c.score - self.tuning.late_penalty, 2)
                c.demoted = (
                    f"came at {_hms(c.t)}, with or after the cancel at {_hms(end)}: "
                    "teardown, not the cause"
                )
                c.notes.append(f"{c.summary} {c.demoted}")

    def _relates(self, a: Cand, b: Cand) -> bool:
        """Does candidate `a` explain candidate `b` (ignoring time)?"""
        a_nodes, b_nodes = set(a.affected), set(b.affected)

        def hit(
            entries: list[str], target: Cand, other_nodes: set[str], target_nodes: set[str]
        ) -> bool:
            for entry in entries:
                base, _, qual = entry.partition("@")
                if base == target.category or base in target.kinds:
                    if qual == "node" and not (other_nodes & target_nodes):
                        continue
                    return True
            return False

        explains = [
            e for i in a.items for e in i.rule.explains if e.partition("@")[0] != SYMPTOMS_TOKEN
        ]
        yields = [e for i in b.items for e in i.rule.yields_to]
        return hit(explains, b, a_nodes, b_nodes) or hit(yields, a, b_nodes, a_nodes)

    def _absorb(self, cands: list[Cand], settings: AnalysisSettings) -> list[Cand]:
        """Fold candidates explained by an earlier (or skew-simultaneous) stronger one."""
        alive = list(cands)
        for b in sorted(cands, key=lambda c: c.score):
            for a in sorted(alive, key=lambda c: -c.score):
                if a is b or b not in alive or a.demoted:
                    continue
                if not self._relates(a, b):
                    continue
                # `a` must be able to have happened first: its earliest possible time (the
                # window start for a line in a file without timed lines) no later than `b`'s
                # latest possible time.
                slack = settings.skew_seconds + max(a.tolerance, b.tolerance)
                if _secs(a.lo, b.hi) > slack:
                    continue
                if self._relates(b, a) and b.score > a.score:
                    continue
                a.absorbed.append(b)
                a.absorbed.extend(b.absorbed)
                b.absorbed = []
                alive.remove(b)
                break
        return alive

    def _earliest_bonus(self, roots: list[Cand], settings: AnalysisSettings) -> None:
        timed = sorted((c for c in roots if c.t is not None), key=lambda c: c.t)  # type: ignore[arg-type,return-value]
        if len(timed) >= 2 and timed[0].t is not None and timed[1].t is not None:
            if _secs(timed[1].t, timed[0].t) > settings.skew_seconds + timed[0].tolerance:
                timed[0].score += self.tuning.earliest_bonus

    # ---- results --------------------------------------------------------------------

    def _chain(
        self, roots_items: list[Item], other_items: list[Item]
    ) -> tuple[list[ChainLink], list[Evidence]]:
        folded: dict[tuple[Any, ...], tuple[ChainLink, Item]] = {}
        order: list[tuple[Any, ...]] = []
        # An untimed line is shown as the interval it was written in. A symptom cannot have
        # happened before the root cause it follows from, so an interval that reaches past the
        # cause starts at the cause (srun exits in an untimed stretch of slurm-*.out after the
        # launch line are not twelve minutes before the NVLink fault that caused them).
        shown: dict[int, tuple[datetime | None, datetime | None]] = {}
        # an untimed line of the root cause itself (srun's `Node failure on X`) is shown from the
        # cause's first exactly timed line (the panic) when its interval reaches that far
        onset = min((i.t for i in roots_items if i.exact and i.t is not None), default=None)
        for it in roots_items:
            shown[id(it)] = _shown(it, onset, root=True)
        root_lo = min((t for i in roots_items if (t := shown[id(i)][0]) is not None), default=None)
        for it in other_items:
            shown[id(it)] = _shown(it, root_lo)

        def when(it: Item) -> tuple[datetime, str]:
            return (shown[id(it)][0] or _FAR, it.obs.node)

        for role, its in (("root_cause", roots_items), ("symptom", other_items)):
            for it in sorted(its, key=when):
                o = it.obs
                key = (role, o.node, o.kind, o.gpu, o.pci, o.code)
                if key in folded:
                    link, first = folded[key]
                    folded[key] = (link.model_copy(update={"count": link.count + o.count}), first)
                    continue
                t_lo, t_hi = shown[id(it)]
                folded[key] = (
                    ChainLink(
                        time=t_lo,
                        time_latest=t_hi,
                        node=o.node,
                        kind=o.kind,
                        role=role,  # type: ignore[arg-type]
                        summary=it.summary,
                        evidence=_evidence(o, it),
                        gpu=o.gpu,
                        pci=o.pci,
                        port=o.port,
                        count=o.count,
                        time_quality=o.time_quality,
                    ),
                    it,
                )
                order.append(key)
        links = [folded[k][0] for k in order]
        cap = self.tuning.max_chain_links
        if len(links) > cap:
            roots = [lk for lk in links if lk.role == "root_cause"][: cap // 2]
            others = sorted((lk for lk in links if lk.role != "root_cause"), key=_link_key)
            keep: list[ChainLink] = list(roots)
            seen_nodes: set[str] = set()
            for lk in others:  # earliest symptom per node first
                if lk.node not in seen_nodes and len(keep) < cap:
                    keep.append(lk)
                    seen_nodes.add(lk.node)
            for lk in others:
                if len(keep) >= cap:
                    break
                if lk not in keep:
                    keep.append(lk)
            links = keep
        links.sort(key=lambda lk: (_utc(lk.time) or _FAR, lk.role != "root_cause", lk.node))
        evidence = [lk.evidence for lk in links if lk.role == "root_cause"]
        evidence += [lk.evidence for lk in links if lk.role != "root_cause"]
        return links, evidence

    def _coverage_notes(self, coverage: list[SourceCoverage], ctx: ExecutionContext) -> list[str]:
        notes = []
        for cov in coverage:
            if cov.nodes_missing:
                missing = ", ".join(cov.nodes_missing)
                notes.append(f"{cov.source}: no data for {missing}")
            if cov.status in ("failed", "empty"):
                notes.append(f"{cov.source}: source {cov.status}")
            for err in cov.errors:
                notes.append(f"{cov.source}: {err}")
            if cov.problems:
                notes.append(
                    f"{cov.source}: {cov.problems} unreadable line(s) skipped "
                    f"(invalid UTF-8 {cov.invalid_utf8_lines}, overlong {cov.overlong_lines}, "
                    f"binary {cov.binary_lines})"
                )
        sources = " ".join(c.source.lower() for c in coverage)
        if not coverage:
            notes.append("no evidence sources reported coverage")
        elif "metric" not in sources and "prometheus" not in sources:
            notes.append("metrics not provided")
        return notes

    def _not_failed(self, ctx, causes, symptoms, coverage, notes, base) -> AttributionResult:  # type: ignore[no-untyped-def]
        links, evidence = self._chain([], causes + symptoms)
        if causes:
            notes.insert(
                0,
                f"job completed; {len(causes)} fault-like event(s) did not fail it, "
                f"first: {min(causes, key=_time_key).summary}",
            )
        return AttributionResult(
            status="not_failed",
            category=None,
            suspect_nodes=[],
            symptom_chain=links,
            evidence=evidence,
            summary=f"job {ctx.job_id} completed ({ctx.state.value}, exit {ctx.exit_code})",
            notes=notes + self._coverage_notes(coverage, ctx),
            **base,
        )

    def _unattributed(  # type: ignore[no-untyped-def]
        self, ctx, roots, symptoms, coverage, notes, base, pointed=None
    ) -> AttributionResult:
        weak = [i for c in roots for i in _all_items(c)]
        links, evidence = self._chain([], weak + symptoms)
        kinds = sorted({s.obs.kind for s in symptoms})
        nodes = sorted({s.obs.node for s in symptoms} - {SCHEDULER_NODE})
        if symptoms:
            summary = (
                f"no root cause found: {len(symptoms)} symptom observation(s) "
                f"({', '.join(kinds)}) on {len(nodes)} node(s), nothing that explains them"
            )
        else:
            summary = "no root cause found: no fault or symptom observed"
        for c in roots:
            notes.extend(c.notes)
        if pointed:
            summary += (
                f"; the other nodes' errors point at {pointed}, which shows no fault in the "
                "evidence read: look there first"
            )
        elif (first := lone_failed_exit(s.obs for s in symptoms)) is not None:
            pointed = first.node
            summary += (
                f"; the first task to fail on its own ran on {pointed} (exit code "
                f"{first.attrs['exit_code']}), the others were ended after it: look there first"
            )
        return AttributionResult(
            status="unattributed",
            category=None,
            suspect_nodes=[pointed] if pointed else [],
            symptom_chain=links,
            evidence=evidence,
            summary=summary,
            notes=notes + self._coverage_notes(coverage, ctx),
            **base,
        )

    def _ambiguous(self, ctx, fits, roots, symptoms, coverage, notes, base) -> AttributionResult:  # type: ignore[no-untyped-def]
        root_items = [i for c in fits for i in c.items]
        others = [i for c in roots for i in _all_items(c) if i not in root_items]
        links, evidence = self._chain(root_items, others + symptoms)
        suspects = sorted({n for c in fits for n in c.nodes})
        candidates = [
            Candidate(
                category=c.category,
                nodes=c.nodes if c.scope != "shared" else c.affected,
                score=round(c.score, 2),
                rule=c.rule.id,
                summary=c.summary,
            )
            for c in fits
        ]
        for c in fits:
            notes.extend(c.notes)
        summary = "ambiguous: " + "; or ".join(
            f"{c.category} ({c.summary}, at {_hms(c.t)})" for c in fits
        )
        return AttributionResult(
            status="ambiguous",
            category=None,
            candidates=candidates,
            suspect_nodes=suspects,
            symptom_chain=links,
            evidence=evidence,
            summary=summary,
            notes=notes + self._coverage_notes(coverage, ctx),
            **base,
        )

    def _attributed(self, ctx, top, roots, symptoms, coverage, notes, base) -> AttributionResult:  # type: ignore[no-untyped-def]
        others = [i for i in _all_items(top) if i not in top.items]
        for c in roots:
            if c is not top:
                others.extend(_all_items(c))
                notes.append(
                    f"also seen, ranked lower ({c.category}, score {c.score:.0f}): {c.summary}"
                    + (f"; {c.demoted}" if c.demoted else "")
                )
        links, evidence = self._chain(top.items, others + symptoms)
        runner = max((c.score for c in roots if c is not top), default=0.0)
        confidence = min(0.95, max(0.05, top.score / 110))
        if runner > 0:
            confidence *= 1 - 0.5 * min(1.0, runner / top.score)
        if top.t is None:
            confidence *= 0.7
        notes = top.notes + notes
        suspects: list[Suspect] = []
        if top.scope != "shared" or top.nodes:
            seen = set()
            for it in sorted(top.items, key=_time_key):
                if not it.rule.locates or it.obs.node == SCHEDULER_NODE:
                    continue
                s = Suspect(
                    node=self._home(it, ctx), gpu=it.obs.gpu, pci=it.obs.pci, port=it.obs.port
                )
                key = (s.node, s.gpu, s.pci, s.port)
                if key not in seen:
                    seen.add(key)
                    suspects.append(s)
            # a portless line (`Cable unplugged`) adds nothing to the same device with a port
            ported = {(x.node, x.gpu, x.pci) for x in suspects if x.port}
            suspects = [x for x in suspects if x.port or (x.node, x.gpu, x.pci) not in ported]
        summary = top.summary
        # the headline names the lead observation, so it shows the lead's own time when that is
        # exact; an untimed line of the same candidate only bounds the time from below
        lead = top.lead
        shown_t, shown_exact = (lead.t, True) if lead.t and lead.exact else (top.t, top.exact)
        if top.rule.late_ok:
            pass  # a scheduler verdict: its time is the job's end, nothing to add
        elif shown_t is not None and not shown_exact:
            # a real next timed line bounds it; the job end alone adds nothing to "after"
            hi = _utc(lead.obs.time_latest) if lead.t == shown_t else None
            summary += (
                f", logged between {_hms(shown_t)} and {_hms(hi)}"
                if hi is not None and hi > shown_t
                else f", logged after {_hms(shown_t)}"
            )
        elif shown_t is not None:
            summary += f" at {_hms(shown_t)}"
            onset = [s for s in symptoms if s.exact and s.rule.onset]
            if onset:
                first = min(onset, key=_time_key)
                same = [s for s in onset if s.obs.kind == first.obs.kind]
                nodes = {s.obs.node for s in same}
                what = KIND_LABELS.get(first.obs.kind, first.obs.kind.replace("_", " "))
                where = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
                gap = _secs(first.t, shown_t)
                if gap >= 1:
                    summary += f", {gap:.0f} s before {what} on {where}"
                else:
                    summary += f", within clock skew of {what} on {where}"
        return AttributionResult(
            status="attributed",
            category=top.category,
            suspect_nodes=list(top.nodes),
            symptom_chain=links,
            evidence=evidence,
            confidence=round(confidence, 2),
            rule=top.lead.rule.id,
            summary=summary,
            scope="shared" if top.scope == "shared" else "node",
            suspects=suspects,
            remediation=top.lead.rule.remediation,
            notes=notes + self._coverage_notes(coverage, ctx),
            **base,
        )


def _all_items(c: Cand) -> list[Item]:
    out = list(c.items)
    for a in c.absorbed:
        out.extend(a.items)
    return out


_FAR = datetime.max.replace(tzinfo=timezone.utc)


def _time_key(it: Item) -> tuple[datetime, str]:
    return (it.t or _FAR, it.obs.node)


def _link_key(lk: ChainLink) -> tuple[datetime, str]:
    return (_utc(lk.time) or _FAR, lk.node)


def _evidence(o: Observation, it: Item | None = None) -> Evidence:
    latest = it.hi if it is not None and not it.exact and it.hi < _FAR_FUTURE else None
    return Evidence(
        source=o.source,
        locator=o.locator.render(),  # the contract string; `ref` keeps it typed
        ref=o.locator,
        time=o.time,
        node=o.node,
        excerpt=o.excerpt,
        time_latest=latest,
        count=o.count,
        time_last=o.time_last,
        locator_last=o.locator_last.render() if o.locator_last is not None else None,
    )


def _shown(
    it: Item, root_lo: datetime | None, root: bool = False
) -> tuple[datetime | None, datetime | None]:
    """(earliest, latest) time a chain link shows; latest is None for an exact time. A root
    cause without any timed line before it shows the job window it lies in."""
    if it.exact:
        return it.t, None
    hi = it.hi if it.hi < _FAR_FUTURE else None
    if root_lo is not None and (hi is None or hi >= root_lo):
        lo = it.lo if it.lo > _FAR_PAST else None
        return (max(lo, root_lo) if lo is not None else root_lo), hi
    if it.t is None and not root:
        return None, hi  # no timed line before it and no cause to follow: time unknown
    return (it.t if it.t is not None else it.lo), hi


def load_engine(path: Path | None = None) -> RuleEngine:
    """Load and validate a rule catalog (default: the packaged rules.yaml)."""
    path = Path(path) if path is not None else DEFAULT_RULES
    rulebook, blob = load_rulebook(path)
    return RuleEngine(rulebook, blob, path)


def render_markdown(engine: RuleEngine) -> str:
    """The rule catalog as Markdown (docs/rules.md is generated by this)."""
    lines = [
        "# Rule catalog",
        "",
        f"Generated from `attribution_dagster/rules/rules.yaml` (rules version "
        f"`{engine.rules_version}`) by "
        "`python -m attribution_dagster.rules.engine.engine --markdown`.",
        "Do not edit by hand.",
        "",
        "Rules are evaluated top to bottom; the first applicable rule classifies an observation.",
        "`cause` rules propose a root-cause category, `symptom` rules mark downstream effects,",
        "`noise` rules drop the observation. Weights rank causes (specificity over volume).",
        "",
        "## How the engine reads a job",
        "",
        *_READING,
        "## Scoring",
        "",
    ]
    for k, v in engine.tuning.model_dump().items():
        lines.append(f"- `{k}`: {v}")
    lines += ["", "## Categories", ""]
    for cat, meaning in CATEGORIES.items():
        ids = [r.id for r in engine.rules if r.category == cat]
        lines.append(f"- `{cat}`: {meaning} ({len(ids)} rules: {', '.join(ids) or 'none'})")
    lines += [
        "",
        "## Rules",
        "",
        "| id | role | category | weight | matches | applies to |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in engine.describe():
        applies = []
        if d["gpu_models"]:
            applies.append("GPU " + "/".join(d["gpu_models"]))
        if d["states"]:
            applies.append("state " + "/".join(d["states"]))
        match = ", ".join(f"{k}={_fmt(v)}" for k, v in d["match"].items()).replace("|", "\\|")
        lines.append(
            f"| `{d['id']}` | {d['role']} | {d['category'] or ''} | {d['weight'] or ''} | "
            f"{match} | {', '.join(applies) or 'all'} |"
        )
    lines += ["", "## Details", ""]
    for d in engine.describe():
        lines.append(f"### `{d['id']}`")
        lines.append("")
        lines.append(d["description"])
        lines.append("")
        lines.append(
            f"- role: {d['role']}"
            + (f", category `{d['category']}`, weight {d['weight']}" if d["category"] else "")
        )
        lines.append(f"- summary: `{d['summary']}`")
        if d["role"] == "cause":
            lines.append(
                f"- scope: {d['scope']}"
                + (
                    f", shared {d['shared']['label']} when seen on many nodes at once"
                    if d["shared"]
                    else ""
                )
            )
            lines.append(f"- explains: {', '.join(d['explains'])}")
        if d["yields_to"]:
            lines.append(f"- yields to an earlier: {', '.join(d['yields_to'])}")
        if d["recovered_by"]:
            lines.append(
                f"- cleared by: {', '.join(d['recovered_by'])} on the same node, well before "
                "the failure (then demoted)"
            )
        if d["terminal"]:
            lines.append("- terminal: causes at or after it (within clock skew) are teardown")
        if d["rivals"]:
            lines.append(
                f"- rivals: also a candidate of {', '.join(d['rivals'])} at the same weight "
                "(the line alone does not tell them apart)"
            )
        if d["follows"]:
            lines.append(
                f"- follows: where the observation named by `{d['follows']}` is present on the "
                "same node (and GPU), classified as that one; else by this rule"
            )
        if d["collapse"]:
            lines.append(
                "- collapse: marks the collective collapse; causes with `after_collapse: "
                "symptom` logged after it are its symptoms"
            )
        if d["after_collapse"] == "symptom":
            lines.append(
                "- after_collapse: symptom: logged after the collective collapse (a later line "
                "of the same file, or later beyond clock skew), it is a symptom of it"
            )
        if d["fallback"]:
            lines.append("- fallback: a cause only when no other cause fits")
        if d["remediation"]:
            lines.append(f"- remediation: {d['remediation']}")
        ex = d["example"]
        lines.append(f"- example: `{ex.get('excerpt') or ex}`")
        lines.append("")
    return "\n".join(lines) + "\n"


_READING = [
    "**Clock offsets.** Ordering causes before symptoms trusts each node's clock, within "
    "`skew_seconds`. A larger offset is learned from lines every node of a job logs at one "
    "true instant (`clock_anchor`): slurmd's `launch task StepId=<job>.<step>` (a step launch "
    "fans out to all its nodes within a second) and NCCL's `commId 0x<id> - Init COMPLETE` "
    "(all ranks leave init together); only lines with their own time count. Lines with the "
    "same step or commId on two or more nodes form a group; groups covering the most nodes "
    "come first. A node's offset is its time minus the group's median (a later group is "
    "referenced to the nodes already estimated), the median over its groups. When it exceeds "
    "the skew tolerance and all its groups agree within the tolerance, every time that node's "
    "clock stamped (its log lines, and their intervals) is shifted by -offset before anything "
    "else reads them; Prometheus samples, Kubernetes Events and cluster-level lines keep "
    "theirs. A note says so (`gpu-l-24's clock reads 90 s ahead of the others (slurmd step "
    "launch 1300130.0, 4 nodes): its times are corrected by -90 s`). The chain and evidence "
    "`time` fields show corrected times; the evidence excerpt and locator still quote the raw "
    "line with the time it was logged at. A node whose groups disagree by more than the "
    "tolerance (its clock stepped mid-job) is not corrected, and the note says why.",
    "",
    "**Untimed lines are intervals.** A line without its own timestamp (NCCL and PyTorch "
    "output, tracebacks, srun messages) was written after the previous timed line of its file "
    "and before the next one (or the job end); a line in a file with no timed line at all lies "
    "somewhere in the job window. The scanner keeps both bounds (`time`, `time_latest`). A "
    "cause precedes a symptom only if it can have happened first (its earliest time is not "
    "after the symptom's latest), it provably precedes when its latest time is not after the "
    "symptom's earliest, and it is late only when even its earliest time is after the "
    "symptom's latest. A decisive line of unknown time (`srun: error: Node failure on X`) still "
    "counts, bounded by the job window. The chain shows such times as a range "
    "(`10:12:40..10:22:41`); a symptom's range never starts before the root cause it follows "
    "from, and the JSON keeps `time` (the earliest bound) plus `time_latest`.",
    "",
    "**Peer blame.** Errors that name a remote peer (IB completion status 12 toward an IP, "
    "`Connection closed by remote peer host<port>`, Gloo `Connection reset by peer [IP]:port`) "
    "are symptoms about that peer. Peers resolve to job nodes through the context's "
    "`node_addresses`, host names in the message, and the addresses the job's own NCCL lines "
    "reveal (`Bootstrap : Using <if>:<ip>`, `NET/IB ... OOB <if>:<ip>`; an address two nodes "
    "claim is dropped); a peer rank (`Ranks 9 failed to pass monitoredBarrier`) resolves through "
    "NCCL's world-communicator init lines (`host:pid:tid [d] NCCL INFO comm 0x.. rank 9 nRanks "
    "16`). When at least two reporting nodes, and most of them, name the same node "
    "(in a two-node job, one, unless the named node complains of a remote failure itself), the "
    "errors converge: retry-exceeded errors toward it stop being a fabric cause "
    "(`about_peer`), and that node's own evidence decides the category (XID, OOM, panic, "
    "silence -> node.down). When it shows nothing, the result is unattributed with that node "
    "in `suspect_nodes` as where to look. Errors toward many unrelated peers, or links that "
    "actually went down, stay `network.fabric`; a SIGKILL with no OOM line, XID or scheduler "
    "verdict is no cause. Without such a pointer, an unattributed result still names the one "
    "node whose task ended on its own (srun `Exited with exit code N`, torchrun `exitcode: N`, "
    "0 < N < 128) when every other node's task was terminated after it.",
    "",
    "**Downstream of the collapse.** Once a collective has timed out or been aborted (a "
    "symptom whose rule says `collapse: true`: the watchdog's collective timeout, its "
    "teardown, an NCCL abort), every rank fails in whatever way it happens to: an absurd CUDA "
    "OOM (`Tried to allocate more than 1EB`), an illegal memory access on each rank, a "
    "segfault in teardown. A cause rule with `after_collapse: symptom` is read as a symptom "
    "when its line is provably after the first collapse line: a later line of the same file, "
    "or an earliest possible time later than the collapse line's latest by more than the "
    "clock skew. Lines that cannot be ordered against the collapse (untimed, in other files) "
    "stay causes. A note says how many were read so.",
    "",
    "**Silent nodes.** The files scanner reports each file's last timed line (found by the "
    "backward searches it already makes); Loki reports each stream's last bucket with lines "
    "(`count_over_time`), an interval: silence must then hold for its latest possible time "
    "against the others' earliest. A node whose logs stop at least `silence_seconds` "
    "before the other nodes' logs of the same kind (same file name, digits folded: a node with "
    "only a quiet kern.log is not silent next to chatty training logs) and before the job end "
    "has gone silent. Silence is a `node.down` cause (`node_silent`, evidence: the last line "
    "it wrote) only when something corroborates it: the peers' errors converge on it, a "
    "scheduler or kernel line names it (`Node failure on X`, `Nodes X not responding`, panic), "
    "or the job ended NODE_FAIL with exactly one node silent. A node that wrote its own "
    "workload's end (a traceback, torchrun's failure summary, an exit, a timeout it waited "
    "into) was alive when its logs stopped and is not silent: an application crash followed "
    "by the others' ten-minute NCCL timeout stays an application error. Its own stronger "
    "evidence (XID 79, a panic) outranks the silence.",
    "",
    "**Progress.** Training progress lines (Megatron / NeMo iterations, HF Trainer loss dicts, "
    "Lightning / tqdm counters, DeepSpeed and torchtitan steps, logged `step ... loss`) are "
    "`progress` observations; the files scanner keeps only each file's last one (searched near "
    "each block end, never a prefilter hit). A fault after which progress went on for "
    "`progress_grace_seconds` (on the nodes it hit, else anywhere in the job; counted from the "
    "fault's latest possible time and last occurrence) did not stop the job: it is demoted like "
    "a storage blip that cleared. Likewise a symptom followed by that much progress (a crash "
    "torchrun restarted from) does not mark the failure onset: a later fault is not penalized "
    "as coming after it. A fault after which progress stopped stays the cause, and the "
    "result notes the stall. For TIMEOUT, the time limit is the verdict unless a fault stalled "
    "progress before it.",
    "",
]


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return "/".join(str(x) for x in v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items()) + "}"
    return str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="rule catalog tools")
    ap.add_argument("--rules", type=Path, default=None, help="rules file (default: packaged)")
    ap.add_argument("--markdown", action="store_true", help="print the catalog as Markdown")
    args = ap.parse_args(argv)
    try:
        engine = load_engine(args.rules)
    except RulebookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.markdown:
        sys.stdout.write(render_markdown(engine))
    else:
        print(f"{engine.rules_version}: {len(engine.rules)} rules OK")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The rule engine: root cause vs downstream symptoms for one job.

    engine = load_engine()                       # validates rules.yaml
    result = engine.attribute(ctx, observations, coverage, settings)

Steps (each visible in `attribute`, each in its own module):

0. with the cluster's topology, move each switch-side line (OpenSM, UFM, a switch's syslog)
   to the job node cabled to the port it names; the rest is context (switchside.py);
1. correct the times of a node whose clock is off (clocks.py); keep observations on the job's
   nodes inside [start - lead, end + lag]; add the scheduler's final state (intake.py);
2. classify each by the first applicable rule (file order = precedence): cause, symptom,
   noise (intake.py); read peer blame and silent nodes (peers.py) and what came after the
   collective collapse (timing.py);
3. group causes into candidates by (category, node), or by category for job-wide rules, and
   fold the same fault on many nodes at once into one *shared* candidate (candidates.py);
4. score: rule weight, + bonus when the cause precedes the first symptom it explains
   (clock skew tolerated), - penalty when it comes after them (teardown), - penalty for an
   unknown time, + a small, capped corroboration bonus (timing.py); demote faults training
   went on after (progress.py);
5. let candidates explain each other (an XID 79 explains later IB retry errors; an earlier
   infrastructure fault outranks a TIMEOUT state), then decide attributed / ambiguous /
   unattributed (here), and build the result with a time-ordered chain (outcome.py);
6. place an attributed network / NVLink cause in the topology: link, leaf, spine or NVLink
   domain (faultdomain.py, thresholds in rules.yaml `fault_domains:`).

`attribution rules --markdown > docs/rules.md` writes the catalog (rules/docs/rules_md.py).
"""

from __future__ import annotations

import hashlib
from functools import partial
from pathlib import Path
from typing import Any

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.core.topology import Topology
from attribution_dagster.rules.engine import (
    faultdomain,
    hangs,
    intake,
    outcome,
    progress,
    switchside,
    timing,
)
from attribution_dagster.rules.engine.candidates import candidates, merge
from attribution_dagster.rules.engine.items import Cand, Item
from attribution_dagster.rules.engine.peers import peers_and_silence
from attribution_dagster.rules.engine.rulebook import Rule, Rulebook, load_rulebook

__all__ = ["DEFAULT_RULES", "RuleEngine", "load_engine"]

DEFAULT_RULES = Path(__file__).parent.parent / "rules.yaml"


class RuleEngine:
    """Applies a validated rule catalog to one job's observations."""

    def __init__(self, rulebook: Rulebook, blob: bytes, path: Path | None = None) -> None:
        self.rulebook = rulebook
        self.rules = rulebook.rules
        self.tuning = rulebook.engine
        self.path = path
        self.rules_version = f"{rulebook.version}+{hashlib.sha256(blob).hexdigest()[:8]}"
        # the rules that can match each kind, in precedence order: classifying an observation
        # tests only those (a job of 20,000 observations and ~100 rules costs per kind, not
        # per rule), and which of them apply to a (GPU model, state) is learned once
        self._by_kind: dict[str, list[Rule]] = {}
        for rule in self.rules:
            for kind in dict.fromkeys(rule.match.kinds):
                self._by_kind.setdefault(kind, []).append(rule)
        self._applicable: dict[tuple[str, str | None, JobState | None], tuple[Rule, ...]] = {}

    def classify(
        self, obs: Observation, gpu_model: str | None = None, state: JobState | None = None
    ) -> Rule | None:
        """The first applicable rule matching `obs` (rules are in precedence order)."""
        key = (obs.kind, gpu_model, state)
        rules = self._applicable.get(key)
        if rules is None:
            rules = tuple(r for r in self._by_kind.get(obs.kind, ()) if r.applies(gpu_model, state))
            self._applicable[key] = rules
        for rule in rules:
            if rule.match.test(obs):
                return rule
        return None

    def describe(self) -> list[dict[str, Any]]:
        """Every rule as plain data, in precedence order (the catalog CLI and docs read it)."""
        return [r.describe() for r in self.rules]

    def attribute(
        self,
        ctx: ExecutionContext,
        observations: list[Observation],
        coverage: list[SourceCoverage],
        settings: AnalysisSettings | None = None,
        topology: Topology | None = None,
    ) -> AttributionResult:
        """`topology`: the cluster's topology snapshot in force when the job ran, if known
        (switch-side lines become evidence about job nodes; a network or NVLink cause gets
        its `fault_domain`)."""
        notes: list[str] = []
        observations, switch_context = switchside.place(ctx, observations, topology, notes)
        # hangs (issue 18): lines about a rank go to its node; who did not arrive
        observations = hangs.place(ctx, observations)
        hang = hangs.analyze(ctx, observations)
        observations = [o for o in observations if not o.attrs.get("undecided")]
        where = _Where(topology, switch_context, self.rulebook.fault_domains)
        result = self._attribute(ctx, observations, coverage, settings, hang, where, notes)
        return hangs.apply(result, hang)

    def _attribute(
        self,
        ctx: ExecutionContext,
        observations: list[Observation],
        coverage: list[SourceCoverage],
        settings: AnalysisSettings | None,
        hang: hangs.Hang,
        where: _Where,
        notes: list[str],
    ) -> AttributionResult:
        settings = settings or AnalysisSettings()
        classify = partial(self.classify, gpu_model=ctx.gpu_model, state=ctx.state)
        observations = intake.correct_clocks(ctx, observations, settings, notes)
        kept = intake.in_scope(ctx, observations, settings, notes)
        if ctx.state in intake.STATES_AS_EVIDENCE:
            kept.append(intake.job_state(ctx))
        causes, symptoms = intake.classify_all(ctx, kept, classify, self.tuning, notes)
        notes.extend(intake.repeat_notes(causes + symptoms))
        timing.downstream_of_collapse(causes, symptoms, settings, notes)
        pointed = peers_and_silence(
            ctx, observations, causes, symptoms, notes, classify, self.tuning
        )

        base: outcome.Base = dict(
            job_id=ctx.job_id,
            failed=ctx.failed,
            rules_version=self.rules_version,
            cluster=ctx.cluster,
            state=ctx.state.value,
            coverage=list(coverage),
        )
        cap = self.tuning.max_chain_links
        if not ctx.failed:
            return outcome.not_failed(ctx, causes, symptoms, coverage, notes, base, cap)

        last = progress.last_progress(observations, ctx)
        roots = self._rank(ctx, kept, causes, symptoms, last, settings, notes)
        result, top = self._decide(ctx, roots, symptoms, last, coverage, notes, base, pointed, hang)
        if top is None or where.topology is None:
            return result
        fd_notes: list[str] = []
        fd = faultdomain.locate(
            ctx, top, kept, where.context, where.topology, where.spec, settings, fd_notes
        )
        if fd is None:
            return result
        return result.model_copy(update={"fault_domain": fd, "notes": [*fd_notes, *result.notes]})

    def _rank(
        self,
        ctx: ExecutionContext,
        kept: list[Observation],
        causes: list[Item],
        symptoms: list[Item],
        last: progress.Progress,
        settings: AnalysisSettings,
        notes: list[str],
    ) -> list[Cand]:
        """Candidates scored by time, demoted where they cleared or training went on,
        folded into the causes that explain them; best first."""
        tn = self.tuning
        cands = candidates(ctx, causes, settings)
        if any(not c.rule.fallback for c in cands):
            cands = [c for c in cands if not c.rule.fallback]
        recovery_kinds = {k for r in self.rules if r.recovered_by for k in r.recovered_by.kinds}
        recoveries = [
            o
            for o in kept
            if o.kind in recovery_kinds and o.time is not None and o.time_quality != "unknown"
        ]
        if last:
            notes.append(progress.progress_note(last, tn))
        # a symptom after which training went on for minutes (a crash torchrun restarted
        # from) did not mark the failure: a cause after it is not late for that
        outlived = progress.outlived_ids(symptoms, last, tn)
        onsets = [s for s in symptoms if id(s) not in outlived]
        for c in cands:
            timing.score(c, symptoms, settings, tn, outlived)
            timing.recovered(c, onsets, recoveries, settings, tn)
            progress.progressed(c, last, tn)
        timing.after_end(cands, settings, tn)
        roots = timing.absorb(cands, settings)
        timing.earliest_bonus(roots, settings, tn)
        roots.sort(key=lambda c: -c.score)
        return roots

    def _decide(
        self,
        ctx: ExecutionContext,
        roots: list[Cand],
        symptoms: list[Item],
        last: progress.Progress,
        coverage: list[SourceCoverage],
        notes: list[str],
        base: outcome.Base,
        pointed: str | None,
        hang: hangs.Hang,
    ) -> tuple[AttributionResult, Cand | None]:
        """Attributed when one timed candidate clears `min_score` and no other of another
        category or node comes within `ambiguity_margin` of it; else ambiguous or
        unattributed. The candidate attributed is returned with the result (else None)."""
        tn = self.tuning
        cap = tn.max_chain_links
        timed = [c for c in roots if c.t is not None and c.score >= tn.min_score]
        contenders = [c for c in roots if c.t is not None] if timed else roots
        for c in roots:
            if c not in contenders:
                notes.append(f"not ranked (unknown time, timed causes exist): {c.summary}")

        if not contenders or contenders[0].score < tn.min_score:
            if contenders:
                best = contenders[0]
                notes.append(
                    f"strongest candidate too weak to attribute ({best.category}, "
                    f"score {best.score:.0f} < {tn.min_score:.0f}): {best.summary}"
                )
            return outcome.unattributed(roots, symptoms, coverage, notes, base, cap, pointed), None

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
                heads = [merge(g) for g in groups.values()]
                roots = heads + [c for c in roots if id(c) not in merged]
                top, rivals = heads[0], heads[1:]
        if rivals:  # the rank that never reached the collective sits under one of them
            top, rivals = hangs.break_tie(hang, top, rivals, notes)
        if rivals:
            fits = [top, *rivals]
            return outcome.ambiguous(fits, roots, symptoms, coverage, notes, base, cap), None
        stall = progress.stall_note(top, last, ctx, tn)
        if stall:
            notes.insert(0, stall)
        return outcome.attributed(ctx, top, roots, symptoms, coverage, notes, base, cap), top


class _Where:
    """What the localisation step needs: the topology, the switch-side lines about no job
    node, and the `fault_domains:` thresholds."""

    def __init__(self, topology: Topology | None, context: list[Observation], spec: Any) -> None:
        self.topology, self.context, self.spec = topology, context, spec


def load_engine(path: Path | None = None, cached: bool = False) -> RuleEngine:
    """Load and validate a rule catalog (default: the packaged rules.yaml). Every call reads
    the file afresh; rules/catalog.py keeps the one compiled copy a process shares, `cached`
    (the YAML's data through the start-up cache, docs/performance.md)."""
    path = Path(path) if path is not None else DEFAULT_RULES
    rulebook, blob = load_rulebook(path, cached)
    return RuleEngine(rulebook, blob, path)

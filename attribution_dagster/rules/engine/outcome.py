"""The last step: build the result (attributed, ambiguous, unattributed, not failed).

The decision itself is made in engine.py; this module turns it into the result contract: a
time-ordered symptom chain with evidence (identical lines folded, capped), suspects, the
headline summary, confidence and the notes that explain what was read and what was not.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import (
    AttributionResult,
    Candidate,
    ChainLink,
    Evidence,
    Suspect,
)
from attribution_dagster.rules.engine.items import (
    FAR_FUTURE,
    FAR_PAST,
    SCHEDULER_NODE,
    Cand,
    Item,
    all_items,
    hms,
    home,
    secs,
    time_key,
    utc,
    without,
)
from attribution_dagster.rules.engine.liveness import lone_failed_exit

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

Base = dict[str, Any]  # the fields every result of the job shares (job id, rules version, ...)


def chain(
    roots_items: list[Item], other_items: list[Item], cap: int
) -> tuple[list[ChainLink], list[Evidence]]:
    """The symptom chain (root causes, then symptoms, folded per node/kind/device and capped
    at `cap` links) and its evidence, roots first."""
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
    links = _cap(_fold(roots_items, other_items, shown), cap)
    links.sort(key=lambda lk: (utc(lk.time) or FAR_FUTURE, lk.role != "root_cause", lk.node))
    evidence = [lk.evidence for lk in links if lk.role == "root_cause"]
    evidence += [lk.evidence for lk in links if lk.role != "root_cause"]
    return links, evidence


class _Folded:
    """A chain link before it is built: its first item (by shown time), the interval shown,
    and how many lines it stands for. A large job folds thousands of these and shows `cap`:
    only those shown are built (summary rendered, models validated)."""

    __slots__ = ("role", "item", "count", "shown", "_link")

    def __init__(
        self, role: str, item: Item, shown: tuple[datetime | None, datetime | None]
    ) -> None:
        self.role, self.item, self.shown = role, item, shown
        self.count = item.obs.count
        self._link: ChainLink | None = None

    @property
    def node(self) -> str:
        return self.item.obs.node

    def key(self) -> tuple[datetime, str]:
        """Earliest first (unknown last), then by node."""
        return (utc(self.shown[0]) or FAR_FUTURE, self.item.obs.node)

    def link(self) -> ChainLink:
        if self._link is None:
            it, o = self.item, self.item.obs
            t_lo, t_hi = self.shown
            link = ChainLink(
                time=t_lo,
                time_latest=t_hi,
                node=o.node,
                kind=o.kind,
                role=self.role,  # type: ignore[arg-type]
                summary=it.summary,
                evidence=_evidence(o, it),
                gpu=o.gpu,
                pci=o.pci,
                port=o.port,
                count=o.count,
                time_quality=o.time_quality,
            )
            if link.count != self.count:
                link = link.model_copy(update={"count": self.count})
            self._link = link
        return self._link


def _fold(
    roots_items: list[Item],
    other_items: list[Item],
    shown: dict[int, tuple[datetime | None, datetime | None]],
) -> list[_Folded]:
    """One link per (role, node, kind, device, code), counting the identical ones."""
    folded: dict[tuple[Any, ...], _Folded] = {}

    def when(it: Item) -> tuple[datetime, str]:
        return (shown[id(it)][0] or FAR_FUTURE, it.obs.node)

    for role, its in (("root_cause", roots_items), ("symptom", other_items)):
        for it in sorted(its, key=when):
            o = it.obs
            key = (role, o.node, o.kind, o.gpu, o.pci, o.code)
            f = folded.get(key)
            if f is not None:
                f.count += o.count
                continue
            folded[key] = _Folded(role, it, shown[id(it)])
    return list(folded.values())


def _cap(folded: list[_Folded], cap: int) -> list[ChainLink]:
    """At most `cap` links: half the roots, the earliest symptom of each node, then the rest."""
    if len(folded) <= cap:
        return [f.link() for f in folded]
    roots = [f for f in folded if f.role == "root_cause"][: cap // 2]
    others = sorted((f for f in folded if f.role != "root_cause"), key=_Folded.key)
    keep: list[_Folded] = list(roots)
    seen_nodes: set[str] = set()
    for f in others:  # earliest symptom per node first
        if f.node not in seen_nodes and len(keep) < cap:
            keep.append(f)
            seen_nodes.add(f.node)
    links = [f.link() for f in keep]
    for f in others:
        if len(links) >= cap:
            break
        lk = f.link()
        if lk not in links:
            links.append(lk)
    return links


def coverage_notes(coverage: list[SourceCoverage]) -> list[str]:
    """What each source could not read, and which kinds of evidence were missing."""
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


def not_failed(
    ctx: ExecutionContext,
    causes: list[Item],
    symptoms: list[Item],
    coverage: list[SourceCoverage],
    notes: list[str],
    base: Base,
    cap: int,
) -> AttributionResult:
    """The job completed: its fault-like events are listed, none is a cause."""
    links, evidence = chain([], causes + symptoms, cap)
    if causes:
        notes.insert(
            0,
            f"job completed; {len(causes)} fault-like event(s) did not fail it, "
            f"first: {min(causes, key=time_key).summary}",
        )
    return AttributionResult(
        status="not_failed",
        category=None,
        suspect_nodes=[],
        symptom_chain=links,
        evidence=evidence,
        summary=f"job {ctx.job_id} completed ({ctx.state.value}, exit {ctx.exit_code})",
        notes=notes + coverage_notes(coverage),
        **base,
    )


def unattributed(
    roots: list[Cand],
    symptoms: list[Item],
    coverage: list[SourceCoverage],
    notes: list[str],
    base: Base,
    cap: int,
    pointed: str | None = None,
) -> AttributionResult:
    """Nothing explains the failure well enough: the symptoms and weak causes as the chain,
    and where to look first when the peers (or a lone failed task) point at one node."""
    weak = [i for c in roots for i in all_items(c)]
    links, evidence = chain([], weak + symptoms, cap)
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
        notes=notes + coverage_notes(coverage),
        **base,
    )


def ambiguous(
    fits: list[Cand],
    roots: list[Cand],
    symptoms: list[Item],
    coverage: list[SourceCoverage],
    notes: list[str],
    base: Base,
    cap: int,
) -> AttributionResult:
    """Distinct causes fit about equally: each is a candidate, all their nodes suspects."""
    root_items = [i for c in fits for i in c.items]
    others = [i for c in roots for i in all_items(c) if i not in root_items]
    links, evidence = chain(root_items, others + symptoms, cap)
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
        f"{c.category} ({c.summary}, at {hms(c.t)})" for c in fits
    )
    return AttributionResult(
        status="ambiguous",
        category=None,
        candidates=candidates,
        suspect_nodes=suspects,
        symptom_chain=links,
        evidence=evidence,
        summary=summary,
        notes=notes + coverage_notes(coverage),
        **base,
    )


def attributed(
    ctx: ExecutionContext,
    top: Cand,
    roots: list[Cand],
    symptoms: list[Item],
    coverage: list[SourceCoverage],
    notes: list[str],
    base: Base,
    cap: int,
) -> AttributionResult:
    """One cause: its category, suspects, headline, confidence (lower when a runner-up is
    close or the time is unknown) and the lower-ranked causes as notes."""
    others = without(all_items(top), top.items)
    for c in roots:
        if c is not top:
            others.extend(all_items(c))
            notes.append(
                f"also seen, ranked lower ({c.category}, score {c.score:.0f}): {c.summary}"
                + (f"; {c.demoted}" if c.demoted else "")
            )
    links, evidence = chain(top.items, others + symptoms, cap)
    runner = max((c.score for c in roots if c is not top), default=0.0)
    confidence = min(0.95, max(0.05, top.score / 110))
    if runner > 0:
        confidence *= 1 - 0.5 * min(1.0, runner / top.score)
    if top.t is None:
        confidence *= 0.7
    return AttributionResult(
        status="attributed",
        category=top.category,
        suspect_nodes=list(top.nodes),
        symptom_chain=links,
        evidence=evidence,
        confidence=round(confidence, 2),
        rule=top.lead.rule.id,
        summary=_headline(top, symptoms),
        scope="shared" if top.scope == "shared" else "node",
        suspects=_suspects(top, ctx),
        remediation=top.lead.rule.remediation,
        notes=top.notes + notes + coverage_notes(coverage),
        **base,
    )


def _suspects(top: Cand, ctx: ExecutionContext) -> list[Suspect]:
    """Node and device of each locating item; none for a shared fault on every node."""
    suspects: list[Suspect] = []
    if top.scope == "shared" and not top.nodes:
        return suspects
    seen = set()
    for it in sorted(top.items, key=time_key):
        if not it.rule.locates or it.obs.node == SCHEDULER_NODE:
            continue
        s = Suspect(node=home(it, ctx), gpu=it.obs.gpu, pci=it.obs.pci, port=it.obs.port)
        key = (s.node, s.gpu, s.pci, s.port)
        if key not in seen:
            seen.add(key)
            suspects.append(s)
    # a portless line (`Cable unplugged`) adds nothing to the same device with a port
    ported = {(x.node, x.gpu, x.pci) for x in suspects if x.port}
    return [x for x in suspects if x.port or (x.node, x.gpu, x.pci) not in ported]


def _headline(top: Cand, symptoms: list[Item]) -> str:
    """The summary: the lead observation, when it happened, and how long before the first
    onset symptom (or that it was within clock skew of it)."""
    summary = top.summary
    # the headline names the lead observation, so it shows the lead's own time when that is
    # exact; an untimed line of the same candidate only bounds the time from below
    lead = top.lead
    shown_t, shown_exact = (lead.t, True) if lead.t and lead.exact else (top.t, top.exact)
    if top.rule.late_ok:
        return summary  # a scheduler verdict: its time is the job's end, nothing to add
    if shown_t is not None and not shown_exact:
        # a real next timed line bounds it; the job end alone adds nothing to "after"
        hi = utc(lead.obs.time_latest) if lead.t == shown_t else None
        return summary + (
            f", logged between {hms(shown_t)} and {hms(hi)}"
            if hi is not None and hi > shown_t
            else f", logged after {hms(shown_t)}"
        )
    if shown_t is None:
        return summary
    summary += f" at {hms(shown_t)}"
    onset = [s for s in symptoms if s.exact and s.rule.onset]
    if onset:
        first = min(onset, key=time_key)
        same = [s for s in onset if s.obs.kind == first.obs.kind]
        nodes = {s.obs.node for s in same}
        what = KIND_LABELS.get(first.obs.kind, first.obs.kind.replace("_", " "))
        where = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
        gap = secs(first.t, shown_t)  # type: ignore[arg-type]
        if gap >= 1:
            summary += f", {gap:.0f} s before {what} on {where}"
        else:
            summary += f", within clock skew of {what} on {where}"
    return summary


def _evidence(o: Observation, it: Item | None = None) -> Evidence:
    latest = it.hi if it is not None and not it.exact and it.hi < FAR_FUTURE else None
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
    hi = it.hi if it.hi < FAR_FUTURE else None
    if root_lo is not None and (hi is None or hi >= root_lo):
        lo = it.lo if it.lo > FAR_PAST else None
        return (max(lo, root_lo) if lo is not None else root_lo), hi
    if it.t is None and not root:
        return None, hi  # no timed line before it and no cause to follow: time unknown
    return (it.t if it.t is not None else it.lo), hi

"""Step 3: group causes into candidates.

By (category, node), or by category for job-wide rules; a line that fits other categories as
well (`rivals`) joins a candidate of each. First, the same fault on many nodes at once is
folded into one *shared* candidate (their switch, their storage): many nodes failing together
point at what they share, not at each node.
"""

from __future__ import annotations

from collections import defaultdict

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.engine.items import (
    SCHEDULER_NODE,
    Cand,
    Item,
    home,
    widest_burst,
    without,
)


def candidates(ctx: ExecutionContext, causes: list[Item], settings: AnalysisSettings) -> list[Cand]:
    """Shared candidates first, then one per (category, node or job) of the rest."""
    shared, rest = _shared(ctx, causes, settings)
    groups: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in rest:
        where = "*job*" if it.rule.scope == "job" else home(it, ctx)
        groups[(it.rule.category or "", where)].append(it)
        for rival in it.rule.rivals:  # the line fits these categories as well
            groups[(rival, where)].append(it)
    out = list(shared)
    for (category, where), its in groups.items():
        affected = sorted({home(i, ctx) for i in its} - {SCHEDULER_NODE})
        located = sorted({home(i, ctx) for i in its if i.rule.locates} - {SCHEDULER_NODE})
        out.append(
            Cand(
                category=category,
                scope="job" if where == "*job*" else "node",
                items=its,
                nodes=located,
                affected=affected,
            )
        )
    return out


def _shared(
    ctx: ExecutionContext, causes: list[Item], settings: AnalysisSettings
) -> tuple[list[Cand], list[Item]]:
    """(shared candidates, the causes left): the same (category, kind) of a `shared` rule on
    enough of the job's nodes within seconds of each other."""
    cands: list[Cand] = []
    rest = list(causes)
    shareable: dict[tuple[str, str], list[Item]] = defaultdict(list)
    for it in rest:
        if it.rule.shared is not None:
            shareable[(it.rule.category or "", it.obs.kind)].append(it)
    for (category, _kind), its in shareable.items():
        spec = its[0].rule.shared
        assert spec is not None
        width = spec.within_seconds if spec.within_seconds is not None else settings.skew_seconds
        width += max(i.tolerance for i in its)
        best = _widest_burst(its, width)
        n = len(best)
        if n >= spec.min_nodes and (
            (spec.enough_nodes is not None and n >= spec.enough_nodes)
            or n / len(ctx.nodes) >= spec.min_share
        ):
            members = [i for i in its if i.obs.node in best]
            rest = without(rest, members)
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
    return cands, rest


def _widest_burst(its: list[Item], width: float) -> set[str]:
    """The most nodes whose timed items fall within `width` seconds of one first item."""
    timed = sorted((i for i in its if i.t is not None), key=lambda i: i.t)  # type: ignore[arg-type,return-value]
    start, end = widest_burst(timed, width)
    return {x.obs.node for x in timed[start:end]}


def merge(cands: list[Cand]) -> Cand:
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

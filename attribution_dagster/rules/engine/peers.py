"""Peer blame and silent nodes (issue 9): what the other nodes say about one of them.

Errors that name a remote peer are symptoms about it; when most reporters name one node,
network errors about that node stop being a fabric cause and that node's own evidence
decides. A node whose logs stop well before the others' becomes a `node_silent` cause when
something corroborates it (the peers point at it, the scheduler named or failed it). The
mechanics (address and rank maps, convergence, last lines) live in liveness.py; this module
applies them to the engine's causes and symptoms.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from attribution_dagster.core.context import ExecutionContext, JobState
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.engine.items import Classify, Item, hms, home, utc
from attribution_dagster.rules.engine.liveness import (
    Theirs,
    converge,
    last_seen,
    latest,
    latest_time,
    learn_addresses,
    learn_ranks,
    peer_node,
    silent,
)
from attribution_dagster.rules.engine.rulebook import EngineTuning

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


def peers_and_silence(
    ctx: ExecutionContext,
    observations: list[Observation],
    causes: list[Item],
    symptoms: list[Item],
    notes: list[str],
    classify: Classify,
    tuning: EngineTuning,
) -> str | None:
    """Apply peer blame, then add corroborated `node_silent` causes. Returns the node the
    peers point at (named as where to look even when nothing explains the failure)."""
    pointed = converge_on_peer(ctx, observations, causes, symptoms, notes)
    silent_nodes(ctx, observations, causes, symptoms, notes, classify, tuning, pointed)
    return pointed


def converge_on_peer(
    ctx: ExecutionContext,
    observations: list[Observation],
    causes: list[Item],
    symptoms: list[Item],
    notes: list[str],
) -> str | None:
    """The node most reporters name, if they converge; `about_peer` causes toward it are
    moved to the symptoms (they say what happened to it, not that the fabric failed)."""
    index = learn_addresses(ctx, observations)
    ranks = learn_ranks(ctx, observations)
    named: dict[str, set[str]] = defaultdict(set)
    about: dict[int, str] = {}
    job_nodes = set(ctx.nodes)
    for it in causes + symptoms:
        target = peer_node(it.obs, index, ranks)
        if target is not None and target != it.obs.node and it.obs.node in job_nodes:
            named[target].add(it.obs.node)
            about[id(it)] = target
    complaining = {
        i.obs.node for i in causes + symptoms if i.obs.kind in PEER_KINDS or id(i) in about
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
    return pointed


def silent_nodes(
    ctx: ExecutionContext,
    observations: list[Observation],
    causes: list[Item],
    symptoms: list[Item],
    notes: list[str],
    classify: Classify,
    tuning: EngineTuning,
    pointed: str | None,
) -> None:
    """Silence, corroborated by the peers, by a scheduler line naming the node, or by
    NODE_FAIL with exactly one node silent, becomes a `node_silent` cause."""
    gap = tuning.silence_seconds
    named_down = [  # a scheduler / kernel line that says the node went away
        home(i, ctx)
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
    if not targets and ctx.state is not JobState.NODE_FAIL:
        return  # no node to test: every node's last line is not looked up (20,000 lines)
    seen = last_seen(observations, ctx.nodes)
    theirs = Theirs(seen)
    found = [(n, tail) for n in targets if (tail := silent(n, seen, ctx.end, gap, theirs))]
    if not found and ctx.state is JobState.NODE_FAIL:
        quiet = [
            (n, tail)
            for n in ctx.nodes
            if n not in ended and (tail := silent(n, seen, ctx.end, gap, theirs))
        ]
        if len(quiet) == 1:
            found = quiet
    for node, tail in found:
        others = sorted(
            utc(o.time)  # type: ignore[type-var]
            for n in seen
            if n != node and (o := latest(seen, n)) is not None
        )
        obs = _silence(node, tail, others)
        rule = classify(obs)
        if rule is None or rule.role != "cause":
            continue
        t, t_hi = utc(tail.time), latest_time(tail)
        assert t is not None
        causes.append(Item(obs, rule, t, 0.0, t, t_hi))
        when = hms(t) if t_hi == t else f"{hms(t)}..{hms(t_hi)}"
        notes.append(
            f"{node} stopped writing at {when} while the other nodes went on "
            f"(median last line {obs.attrs['others_until']})"
        )


def _silence(node: str, tail: Observation, others: list[datetime]) -> Observation:
    """The `node_silent` observation: its evidence is the last line the node wrote."""
    interval = tail.time_quality != "exact" and tail.time_latest is not None
    return Observation(
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
            "others_until": hms(others[len(others) // 2]) if others else None,
            "stream": tail.attrs.get("stream"),
        },
    )

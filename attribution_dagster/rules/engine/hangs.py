"""Hangs (issue 18): find the rank that did not arrive at the collective the others wait in.

A hung collective leaves no hardware line: every rank's watchdog fires after its timeout and
the job dies with thousands of identical timeouts. What tells the ranks apart is how far each
got, per process group:

- the watchdog's `last enqueued NCCL work: N, last completed NCCL work: M` (kind
  `collective_progress`, tool `watchdog`) and a flight-recorder dump's `pg_status` (tool
  `flight_recorder`): the ranks whose last enqueued collective is behind the others' never
  reached the collective the others wait in (stragglers); when every rank enqueued it, the
  ranks that completed least are the suspects;
- `torchfrtrace`'s `Not all ranks joining collective ... missing ranks: {1}` and a dump
  without the entry the others are in (kind `rank_missing`);
- NCCL RAS (`ncclras`) naming a dead or silent process (kind `rank_unreachable`).

Each names a rank; the rank is mapped to its node and GPU through the NCCL init lines of the
world communicator, the launcher prefixes (`[rank17]:`, srun `--label`), the dump's directory
(`dumps/<node>/`), or, last, the context's node order when the world divides evenly.

The outcome (`apply`): a cause on a straggler's node is attributed as usual, with the
straggler evidence in the chain (and `break_tie` prefers it among candidates on different
nodes); with no cause the result stays `unattributed`, `suspect_nodes` names the straggler's
node and `leads` says where to look first. More than a few laggards, or sources naming
different nodes, are said so and name no suspect. A collective mismatch (`collective_mismatch`)
is a cause of its own (rules.yaml: app.error on the culprit rank's node).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.formats.flight_recorder import FlightDump, compare
from attribution_dagster.core.locators import DumpEntry
from attribution_dagster.core.observation import Observation
from attribution_dagster.core.result import AttributionResult, ChainLink, Evidence, Lead
from attribution_dagster.rules.engine.liveness import learn_ranks

HANG_KINDS = frozenset({"collective_progress", "rank_missing", "rank_unreachable"})
MAX_LAGGARD_NODES = 2  # more nodes behind than this: a job-wide stall, not one straggler
PLACEHOLDER = "(rank {})"
# the local GPU in an NCCL init line: `cudaDev 1`, `localRank 1`, or the `host:pid:tid [1]` prefix
_LOCAL_RANK = re.compile(r"\[default(\d{1,3})\]:")
_INIT_GPU = re.compile(
    r"cudaDev (\d{1,3})|localRank (\d{1,3})|:\d{1,10}:\d{1,10} \[(\d{1,3})\] NCCL"
)  # the node of a dump observation until its rank is mapped
_FAR = datetime.max.replace(tzinfo=timezone.utc)


# ---- dumps -> observations -----------------------------------------------------------------


def _t(ns: int | None) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc) if ns else None


def dump_observations(dumps: list[FlightDump]) -> list[Observation]:
    """What the dumps say, as observations located at `dumps/<file>:pg P seq S`. Each names its
    rank (`attrs.subject_rank`); `place` moves it to the rank's node."""
    out: list[Observation] = []
    for f in compare(dumps):
        node = f.node or PLACEHOLDER.format(f.rank)
        # a missing rank is shown at its own last entry (the one the others are in is absent)
        at = f.last_enqueued if f.what == "missing" else f.seq
        loc = DumpEntry(path=f.path or "dumps", pg=f.pg, seq=at)
        base: dict[str, Any] = dict(
            node=node, time=_t(f.time_ns), time_quality="exact" if f.time_ns else "unknown",
            source="files", locator=loc, parser="flight_recorder",
        )
        attrs: dict[str, Any] = {"subject_rank": f.rank, "pg": f.pg, "seq": f.seq,
                                 "tool": "flight_recorder"}
        if f.op:
            attrs["op"] = f.op
        if f.what == "progress":
            attrs.update(rank=f.rank, global_rank=f.rank, last_enqueued=f.last_enqueued,
                         last_started=f.last_started, last_completed=f.last_completed)
            excerpt = (f"rank {f.rank} pg {f.pg}: last enqueued {f.last_enqueued}, last started "
                       f"{f.last_started}, last completed {f.last_completed}"
                       + (f" ({f.op} {f.state})" if f.op else ""))
            out.append(
                Observation(kind="collective_progress", attrs=attrs, excerpt=excerpt, **base)
            )
        elif f.what == "missing":
            attrs.update(ranks=str(f.rank), last_enqueued=f.last_enqueued,
                         last_completed=f.last_completed)
            excerpt = (f"rank {f.rank} has no entry for pg {f.pg} seq {f.seq}"
                       + (f" ({f.op})" if f.op else "") + f": {f.detail}; its last enqueued "
                       f"is {f.last_enqueued}")
            out.append(Observation(kind="rank_missing", attrs=attrs, excerpt=excerpt, **base))
        elif f.what == "mismatch" and f.rank >= 0:
            attrs.update(rank=f.rank, error_type=f.error_type)
            excerpt = f"rank {f.rank} pg {f.pg} seq {f.seq}: {f.error_type}: {f.detail}"
            out.append(Observation(kind="collective_mismatch", attrs=attrs, excerpt=excerpt,
                                   **base))
        elif f.what == "mismatch":
            attrs.update(error_type=f.error_type, undecided=True)
            excerpt = f"pg {f.pg} seq {f.seq}: ranks disagree, {f.detail}"
            out.append(Observation(kind="collective_mismatch", attrs=attrs, excerpt=excerpt,
                                   **{**base, "node": "(no majority)"}))
    return out


def with_dump_observations(
    observations: list[Observation], dumps: list[FlightDump], ctx: ExecutionContext
) -> list[Observation]:
    """The normalizer's observations plus the dumps', time-ordered (unknown times last)."""
    extra = dump_observations(dumps)
    if not extra:
        return observations

    def key(o: Observation) -> tuple[int, float, str, str]:
        if o.time is None or o.time_quality == "unknown":
            return (1, 0.0, o.node, o.locator.render())
        t = o.time if o.time.tzinfo else o.time.replace(tzinfo=timezone.utc)
        return (0, t.timestamp(), o.node, o.locator.render())

    return sorted([*observations, *extra], key=key)


# ---- ranks -> nodes -------------------------------------------------------------------------


@dataclass
class RankMap:
    node: dict[int, str] = field(default_factory=dict)
    gpu: dict[int, int] = field(default_factory=dict)
    how: dict[int, str] = field(default_factory=dict)
    world: int = 0  # the world size the NCCL init lines state (nRanks), 0 when none does

    def where(self, rank: int | None) -> tuple[str | None, int | None]:
        if rank is None:
            return None, None
        return self.node.get(rank), self.gpu.get(rank)


def rank_map(ctx: ExecutionContext, observations: list[Observation]) -> RankMap:
    """Global rank -> node (and local GPU): NCCL init lines of the world communicator, lines a
    launcher prefix (`[rank17]:`) or a dump directory placed, else the context's node order."""
    m = RankMap()
    for r, node in learn_ranks(ctx, observations).items():
        m.node[r], m.how[r] = node, "NCCL init"
    world = 0
    for o in observations:
        if o.kind == "node_address" and isinstance(o.attrs.get("rank"), int):
            world = max(world, int(o.attrs.get("nranks") or 0))  # type: ignore[arg-type]
            m.world = world
            gpu = o.gpu
            if gpu is None:
                g = _INIT_GPU.search(o.excerpt)
                gpu = int(next(x for x in g.groups() if x is not None)) if g else None
            if gpu is not None and m.node.get(int(o.attrs["rank"])) == o.node:  # type: ignore[arg-type]
                m.gpu.setdefault(int(o.attrs["rank"]), gpu)  # type: ignore[arg-type]
    claims: dict[int, set[str]] = defaultdict(set)
    job_nodes = set(ctx.nodes)
    for o in observations:
        if o.node not in job_nodes:
            continue
        r = o.attrs.get("launcher_rank", o.attrs.get("global_rank"))
        if o.parser == "flight_recorder":
            r = o.attrs.get("subject_rank")
        if isinstance(r, int) and not isinstance(r, bool):
            claims[r].add(o.node)
            world = max(world, r + 1)
            if o.kind == "rank_unreachable" and o.gpu is not None:
                m.gpu.setdefault(r, o.gpu)
    for r, nodes in claims.items():
        if r not in m.node and len(nodes) == 1:
            m.node[r], m.how[r] = next(iter(nodes)), "launcher prefix"
    nodes = list(ctx.nodes)
    if world and nodes and world % len(nodes) == 0 and len(m.node) < world:
        per = world // len(nodes)
        for r in range(world):
            if r not in m.node:
                m.node[r], m.how[r] = nodes[r // per], "context node order"
                m.gpu.setdefault(r, r % per)
    return m


def place(ctx: ExecutionContext, observations: list[Observation]) -> list[Observation]:
    """Observations about a rank (a dump's, torchfrtrace's `missing ranks: {1}` and `Culprit
    rank 3`) moved to that rank's node and GPU; one copy per rank a line names. A rank that
    maps to no node is left where it was (a placeholder node is then outside the job)."""
    if not any(_about_ranks(o) for o in observations):
        return observations
    ranks = rank_map(ctx, observations)
    job_nodes = set(ctx.nodes)
    out: list[Observation] = []
    for o in observations:
        subjects = _about_ranks(o)
        if not subjects:
            out.append(o)
            continue
        for r in subjects:
            node, gpu = ranks.where(r)
            if node is None:
                out.append(o)
                continue
            attrs = {**o.attrs, "subject_rank": r}
            if o.node in job_nodes and o.node != node:
                attrs["logged_on"] = o.node
            if r in ranks.how:
                attrs["rank_node_from"] = ranks.how[r]
            out.append(o.model_copy(update={
                "node": node, "gpu": gpu if gpu is not None else o.gpu, "attrs": attrs,
            }))
    return out


def _about_ranks(o: Observation) -> list[int]:
    if o.kind == "collective_progress" and o.parser != "flight_recorder":
        return []  # a watchdog line is about the rank that printed it, on its own node
    if o.kind not in ("rank_missing", "collective_mismatch", "collective_progress"):
        return []
    spec = o.attrs.get("ranks")
    if isinstance(spec, str) and o.kind == "rank_missing":
        return sorted({int(x) for x in spec.replace("{", "").replace("}", "").split(",")
                       if x.strip().isdigit()})
    r = o.attrs.get("subject_rank")
    return [r] if isinstance(r, int) and not isinstance(r, bool) else []


# ---- the analysis ---------------------------------------------------------------------------


@dataclass
class Hang:
    leads: list[Lead] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    evidence: list[Observation] = field(default_factory=list)
    verdict: str = ""  # "" (nothing to say), leads, too_many, conflict

    @property
    def nodes(self) -> set[str]:
        return {lead.node for lead in self.leads}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


Leads = dict[str, list[tuple[Lead, list[Observation]]]]  # per tool: (lead, its evidence)


def analyze(ctx: ExecutionContext, observations: list[Observation]) -> Hang:
    """Stragglers per process group and source; leads where the sources agree."""
    hang = Hang()
    job_nodes = set(ctx.nodes)
    obs = [o for o in observations if o.node in job_nodes]
    for o in observations:
        if o.kind == "collective_mismatch" and o.attrs.get("undecided"):
            hang.notes.append(
                f"flight recorder: {o.excerpt}: no culprit named (the ranks' calls conflict)"
            )
    by_tool: Leads = defaultdict(list)
    rmap = rank_map(ctx, observations)
    too_many = _progress_leads(ctx, obs, rmap, by_tool)
    _named_leads(obs, by_tool)
    return _decide(hang, by_tool, too_many)


def _progress_leads(
    ctx: ExecutionContext, obs: list[Observation], rmap: RankMap, by_tool: Leads
) -> list[str]:
    """Per tool and process group, the ranks behind the others (watchdog progress and bare
    timeouts, dumps' pg_status); returns the groups where too many lag to name one."""
    too_many: list[str] = []
    groups: dict[tuple[str, str], dict[int, list[Observation]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for o in obs:
        if o.kind == "collective_timeout":
            _timeout_progress(o, groups)
            continue
        if o.kind != "collective_progress":
            continue
        enq = _int(o.attrs.get("last_enqueued"))
        rank = _int(o.attrs.get("global_rank"))
        if rank is None:
            rank = _int(o.attrs.get("rank"))
        if enq is None or rank is None:
            continue
        pg = str(o.attrs.get("pg") if o.attrs.get("pg") is not None else "0")
        groups[(str(o.attrs.get("tool") or "watchdog"), pg)][rank].append(o)
    silent = _silent_ranks(groups.get((TIMEOUT_TOOL, "0"), {}), rmap, ctx)
    for (tool, pg), ranks in sorted(groups.items()):
        if len(ranks) < 2:
            continue
        enq = {r: max(_enqueued(x) for x in xs) for r, xs in ranks.items()}
        com = {r: max(_completed(x) for x in xs) for r, xs in ranks.items()}
        # the collective most ranks wait in (a rank may already have enqueued the next one)
        counts = Counter(enq.values())
        top = max(v for v, n in counts.items() if n == max(counts.values()))
        behind = sorted(r for r in ranks if enq[r] < top)
        if behind:
            why = ("last enqueued collective {e} while {n} other rank(s) of process group "
                   "{pg} enqueued {top}: it never reached the collective they wait in")
            lag = {r: why.format(e=enq[r], n=counts[top], pg=pg, top=top)
                   for r in behind}
            seq = top
        else:
            best = max(com.values())
            low = min(com.values())
            if low == best:
                continue
            behind = sorted(r for r in ranks if com[r] == low)
            lag = {r: (f"every rank of process group {pg} enqueued collective {top}; this one "
                       f"completed only up to {low}, the others up to {best}") for r in behind}
            seq = low + 1
        lag_nodes = {ranks[r][0].node for r in behind}
        if len(lag_nodes) > MAX_LAGGARD_NODES or 2 * len(behind) >= len(ranks) + (len(ranks) == 2):
            too_many.append(
                f"{tool}: {len(behind)} of {len(ranks)} reporting rank(s) of process group {pg} "
                f"lag behind (on {len(lag_nodes)} node(s)): too many to name one straggler"
            )
            continue
        ahead = next(r for r in ranks if r not in lag)
        for r in behind:
            mine = max(ranks[r], key=_enqueued)
            other = max(ranks[ahead], key=_enqueued)
            gpu = mine.gpu
            if gpu is None and (local := _LOCAL_RANK.search(mine.excerpt)):
                gpu = int(local.group(1))  # torchrun's `[default3]:`: local rank = local GPU
            if gpu is None and (tool != "watchdog" or _int(mine.attrs.get("global_rank")) == r
                                or pg == "0"):
                node, gpu = rmap.where(r)
                gpu = gpu if node == mine.node else None
            lead = Lead(node=mine.node, gpu=gpu, rank=r, process_group=pg, seq=seq,
                        why=f"rank {r} ({tool}): {lag[r]}",
                        evidence=[mine.locator.render(), other.locator.render()])
            by_tool[tool].append((lead, [mine, other]))

    for lead, its in silent:
        by_tool[TIMEOUT_TOOL].append((lead, its))

    return too_many


def _named_leads(obs: list[Observation], by_tool: Leads) -> None:
    """Tools that name the missing rank outright: torchfrtrace, dumps, NCCL RAS."""
    for o in obs:
        if o.kind == "rank_missing":
            tool = str(o.attrs.get("tool") or "torchfrtrace")
            r = _int(o.attrs.get("subject_rank"))
            why = (f"rank {r if r is not None else '?'} ({tool}): not in collective "
                   f"{o.attrs.get('seq', '?')} of process group {o.attrs.get('pg', '?')} that "
                   "the other ranks joined")
            if o.attrs.get("rank_node_from") == "context node order":
                why += " (node guessed from the context's node order: no log line names it)"
            lead = Lead(node=o.node, gpu=o.gpu, rank=r, process_group=_s(o.attrs.get("pg")),
                        seq=_int(o.attrs.get("seq")), why=why, evidence=[o.locator.render()])
            by_tool[tool].append((lead, [o]))
        elif o.kind == "rank_unreachable":
            r = _int(o.attrs.get("rank"))
            status = o.attrs.get("status") or o.attrs.get("what") or "unreachable"
            who = f"rank {r}" if r is not None else f"process {o.attrs.get('pid', '?')}"
            gpu = f" GPU {o.gpu}" if o.gpu is not None else ""
            lead = Lead(node=o.node, gpu=o.gpu, rank=r,
                        why=f"{who} (NCCL RAS): {status} on {o.node}{gpu}",
                        evidence=[o.locator.render()])
            by_tool["ncclras"].append((lead, [o]))



def _decide(hang: Hang, by_tool: Leads, too_many: list[str]) -> Hang:
    """Leads where the tools agree on few nodes; otherwise say why none is named."""
    if too_many and not by_tool:
        hang.verdict = "too_many"
        hang.notes.extend(too_many)
        return hang
    if not by_tool:
        return hang
    per_tool_nodes = {tool: {lead.node for lead, _ in items} for tool, items in by_tool.items()}
    all_nodes = set().union(*per_tool_nodes.values())
    if len(all_nodes) > MAX_LAGGARD_NODES:
        hang.verdict = "too_many"
        hang.notes.append(
            "hang: ranks on " + ", ".join(sorted(all_nodes)) + " lag or are missing: too many "
            "to name one straggler"
        )
        return hang
    shared = set.intersection(*per_tool_nodes.values())
    if len(per_tool_nodes) > 1 and not shared:
        hang.verdict = "conflict"
        hang.notes.append(
            "hang: the sources disagree on the straggler ("
            + "; ".join(f"{t}: {', '.join(sorted(n))}" for t, n in sorted(per_tool_nodes.items()))
            + "): no suspect named"
        )
        return hang
    hang.notes.extend(too_many)
    keep = shared if len(per_tool_nodes) > 1 else all_nodes
    seen: dict[tuple[str, int | None], Lead] = {}
    for tool in sorted(by_tool):
        for lead, its in by_tool[tool]:
            if lead.node not in keep:
                continue
            # one process seen twice (RAS names the process and its rank) is one lead
            key = (lead.node, lead.gpu) if lead.gpu is not None else (lead.node, lead.rank)
            if key in seen:
                old = seen[key]
                seen[key] = old.model_copy(update={
                    "why": old.why + "; " + lead.why,
                    "gpu": old.gpu if old.gpu is not None else lead.gpu,
                    "rank": old.rank if old.rank is not None else lead.rank,
                    "process_group": old.process_group or lead.process_group,
                    "seq": old.seq if old.seq is not None else lead.seq,
                    "evidence": old.evidence + [e for e in lead.evidence if e not in old.evidence],
                })
            else:
                seen[key] = lead
            hang.evidence.extend(x for x in its if x not in hang.evidence)
    hang.leads = list(seen.values())
    hang.verdict = "leads"
    return hang


TIMEOUT_TOOL = "watchdog timeouts"
MAX_SILENT_RANKS = 2  # more ranks silent than this: a partial log, not a straggler


def _enqueued(o: Observation) -> int:
    v = _int(o.attrs.get("last_enqueued"))
    return v if v is not None else (_int(o.attrs.get("seq")) or 0)


def _completed(o: Observation) -> int:
    v = _int(o.attrs.get("last_completed"))
    return v if v is not None else max((_int(o.attrs.get("seq")) or 1) - 1, 0)


def _timeout_progress(
    o: Observation, groups: dict[tuple[str, str], dict[int, list[Observation]]]
) -> None:
    """A bare watchdog timeout (`WorkNCCL(SeqNum=412, ...)`) says the rank enqueued 412 and
    has not completed it. Only a line that names its process group counts: bare `[Rank N]`
    lines of different groups carry unrelated sequence numbers."""
    seq, pg = _int(o.attrs.get("seq")), _int(o.attrs.get("pg"))
    rank = _int(o.attrs.get("global_rank"))
    if rank is None and pg == 0:
        rank = _int(o.attrs.get("rank"))  # in the default group, the group rank is global
    if seq is None or pg is None or rank is None:
        return
    groups[(TIMEOUT_TOOL, str(pg))][rank].append(o)


def _silent_ranks(
    ranks: dict[int, list[Observation]], rmap: RankMap, ctx: ExecutionContext
) -> list[tuple[Lead, list[Observation]]]:
    """The default group's ranks that printed no timeout while every other rank timed out at
    the same collective: a rank with no pending collective has nothing to time out on, so
    it is the one the others wait for. Needs the world size from the NCCL init lines."""
    world = rmap.world
    if not ranks or not world or len(ranks) >= world:
        return []
    seqs = {_enqueued(x) for xs in ranks.values() for x in xs}
    missing = [r for r in range(world) if r not in ranks]
    if len(seqs) != 1 or len(missing) > MAX_SILENT_RANKS or len(ranks) < 2:
        return []
    seq = seqs.pop()
    sample = ranks[min(ranks)][0]
    out = []
    for r in missing:
        node, gpu = rmap.where(r)
        if node is None or node not in ctx.nodes:
            continue
        why = (f"rank {r} ({TIMEOUT_TOOL}): printed no watchdog timeout while the other "
               f"{len(ranks)} rank(s) of process group 0 timed out in collective {seq}: "
               "it never enqueued the collective they wait in")
        out.append((Lead(node=node, gpu=gpu, rank=r, process_group="0", seq=seq, why=why,
                         evidence=[sample.locator.render()]), [sample]))
    return out


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


# ---- the outcome ----------------------------------------------------------------------------


def break_tie(hang: Hang, top: Any, rivals: list[Any], notes: list[str]) -> tuple[Any, list[Any]]:
    """Among candidate causes on different nodes, the one on the straggler's node wins."""
    if not rivals or not hang.leads:
        return top, rivals
    fits = [c for c in (top, *rivals) if set(c.nodes) & hang.nodes]
    if len(fits) != 1 or any(set(c.nodes) & set(fits[0].nodes) for c in (top, *rivals)
                             if c is not fits[0]):
        return top, rivals
    won = fits[0]
    lead = next(lead for lead in hang.leads if lead.node in won.nodes)
    notes.append(
        f"the straggler evidence breaks the tie: {lead.why}; the cause on "
        f"{', '.join(won.nodes)} is kept over "
        + "; ".join(f"{c.category} on {', '.join(c.nodes)}" for c in (top, *rivals) if c is not won)
    )
    return won, []


def _key(lk: ChainLink) -> tuple[datetime, bool, str]:
    t = lk.time
    if t is not None and t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return (t or _FAR, lk.role != "root_cause", lk.node)


def _compared(o: Observation) -> str:
    if o.kind == "collective_progress":
        r = o.attrs.get("global_rank", o.attrs.get("rank"))
        return (f"rank {r} on {o.node}, for comparison: last enqueued "
                f"{o.attrs.get('last_enqueued')}, last completed {o.attrs.get('last_completed')}")
    return o.excerpt


def apply(result: AttributionResult, hang: Hang) -> AttributionResult:
    """The straggler evidence in the chain; leads and suspects when no cause is proven."""
    if not hang.verdict and not hang.notes:
        return result
    update: dict[str, Any] = {"notes": [*result.notes, *hang.notes]}
    if hang.evidence and result.status != "not_failed":
        have = {lk.evidence.locator for lk in result.symptom_chain}
        links = list(result.symptom_chain)
        why = {lead.evidence[0]: lead.why for lead in hang.leads if lead.evidence}
        for o in hang.evidence:
            loc = o.locator.render()
            if loc in have:
                continue
            have.add(loc)
            links.append(ChainLink(
                time=o.time if o.time_quality != "unknown" else None,
                time_latest=o.time_latest if o.time_quality == "inherited" else None,
                node=o.node, kind=o.kind, role="symptom",
                summary=why.get(loc, _compared(o))[:300], gpu=o.gpu,
                time_quality=o.time_quality,
                evidence=Evidence(source=o.source, locator=loc, ref=o.locator, time=o.time,
                                  node=o.node, excerpt=o.excerpt),
            ))
        links.sort(key=_key)
        update["symptom_chain"] = links
        update["evidence"] = [lk.evidence for lk in links if lk.role == "root_cause"] + [
            lk.evidence for lk in links if lk.role != "root_cause"
        ]
    if result.status == "unattributed" and hang.leads:
        nodes = list(dict.fromkeys(lead.node for lead in hang.leads))
        first = hang.leads[0]
        where = first.node + (f" GPU {first.gpu}" if first.gpu is not None else "")
        update.update(
            suspect_nodes=nodes,
            leads=hang.leads,
            summary=(result.summary or "no root cause found")
            + f"; hang: look first at {where} (rank {first.rank}): {first.why}",
        )
    elif result.status == "unattributed" and hang.verdict in ("too_many", "conflict"):
        update["summary"] = (result.summary or "no root cause found") + "; hang: " + hang.notes[-1]
    elif result.status == "attributed" and hang.leads:
        on = set(result.suspect_nodes) & hang.nodes
        update["notes"].append(
            ("the straggler is on the cause's node: " if on else
             "the straggler is on another node than the cause: ")
            + "; ".join(lead.why + f" (on {lead.node})" for lead in hang.leads)
        )
    return result.model_copy(update=update)

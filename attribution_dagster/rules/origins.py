"""Where a line came from: NCCL's `host:pid:tid [dev]` prefix, launcher prefixes naming a
rank or an srun task (relabel), and host-less echoes of host-named lines."""

from __future__ import annotations

import re
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.rules.engine.liveness import learn_ranks
from attribution_dagster.rules.facts import Fact


def _index(ctx: ExecutionContext) -> NodeIndex:
    return NodeIndex.cached(ctx)


def _resolve_host(host: str | None, ctx: ExecutionContext | None) -> str | None:
    """The ctx node a host string names (nodes.NodeIndex: exact, FQDN/short, case, port,
    IPs and aliases from ctx.node_addresses, a job pod's name), else None."""
    if not host or ctx is None:
        return None
    return _index(ctx).resolve(host)


# NCCL's debug prefix `host:pid:tid [cudaDev]` says which host (and CUDA device) emitted the
# line, whatever the line then reports (`mlp-n03:2211409:2213001 [5] include/alloc.h:193 NCCL
# WARN Cuda failure 'uncorrectable ECC error encountered'`). Up to ~120 characters of timestamp /
# srun / ray prefixes may precede it.
_NCCL_ORIGIN = re.compile(
    r"^.{0,120}?(?<![\w.:-])(?P<host>[A-Za-z][\w.-]{0,63}):\d{1,10}:\d{1,10} \[(?P<dev>\d{1,3})\] "
)
# what every such prefix holds: one scan for it spares most lines the lazy walk above (a
# lookbehind at each of 120 positions, 4 µs on a long torch watchdog line)
_NCCL_HINT = re.compile(r":\d{1,10}:\d{1,10} \[\d{1,3}\] ")


def nccl_origin(line: str) -> re.Match[str] | None:
    """The NCCL `host:pid:tid [dev]` prefix of a line (groups host, dev), or None."""
    return _NCCL_ORIGIN.match(line) if _NCCL_HINT.search(line) else None


def _task_ids(spec: str) -> set[int]:
    """srun task lists: `3`, `0-7`, `0,2-3`, `[0-7]` (at most 4096 ids)."""
    out: set[int] = set()
    for part in spec.strip("[]").split(","):
        lo, _, hi = part.strip("[] ").partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            continue
        a, b = int(lo), int(hi) if hi else int(lo)
        if b < a or b - a > 4096:
            continue
        out.update(range(a, b + 1))
    return out


def _relabel_by_origin(
    per_record: list[tuple[RawRecord, list[Fact]]],
    ctx: ExecutionContext | None,
    origin_of: Any,
) -> list[tuple[RawRecord, list[Fact]]]:
    """Launcher labels that name a rank or an srun task, not a host (parsers.yaml `origins`).

    srun gathers every task's output into one file on the batch host (`slurm-<job>.out`), each
    line labelled `N: ` (srun --label); torchrun and mpirun label each line with the global
    rank (`[rank7]:`, `[1,7]<stderr>:`). The file's node is then not where the line came from.
    A task is resolved per file (`srun: error: <host>: task N: ...`, or a labelled line naming
    its host, e.g. NCCL `N: host:pid:tid`), a rank job-wide (the world communicator's NCCL init
    lines, or a rank-labelled line naming its host). A labelled observation is moved to that
    host, with attrs.logged_on = the node whose log held it. A task or rank claimed by two hosts
    is left alone; a rank that resolves wins over the srun task around it."""
    if ctx is None:
        return per_record
    tasks: dict[str, dict[int, str | None]] = {}
    ranks: dict[int, str | None] = dict(learn_ranks(ctx, (o for _, obs in per_record for o in obs)))
    # a record's prefixes are read when a fact of it asks, else only if there is something to
    # relabel (most jobs: nothing, and no record's prefixes are read here)
    origins: list[dict[str, Any] | None] = []

    def claim(table: dict[int, str | None], key: int, node: str) -> None:
        table[key] = node if table.get(key, node) == node else None

    job_nodes = set(ctx.nodes)
    for rec, obs in per_record:
        origin = None
        path = rec.locator.stream
        for o in obs:
            if o.node not in job_nodes:
                continue
            spec = o.attrs.get("tasks")
            if isinstance(spec, str) and o.attrs.get("host") is not None:
                if _resolve_host(str(o.attrs["host"]), ctx):
                    for t in _task_ids(spec):
                        claim(tasks.setdefault(path, {}), t, o.node)
            elif "logged_on" in o.attrs:
                if origin is None:
                    origin = origin_of(rec.text)
                if "host" in origin:
                    continue
                if "task" in origin:
                    claim(tasks.setdefault(path, {}), origin["task"], o.node)
                if "rank" in origin:
                    claim(ranks, origin["rank"], o.node)
        origins.append(origin)
    if not any(tasks.values()) and not any(ranks.values()):
        return per_record
    out: list[tuple[RawRecord, list[Fact]]] = []
    for (rec, obs), read in zip(per_record, origins, strict=True):
        origin = read if read is not None else origin_of(rec.text) if obs else {}
        host, label = None, {}
        if "rank" in origin and ranks.get(origin["rank"]):
            host, label = ranks[origin["rank"]], {"launcher_rank": origin["rank"]}
        elif "task" in origin:
            table = tasks.get(rec.locator.stream) or {}
            host, label = table.get(origin["task"]), {"srun_task": origin["task"]}
        if "host" in origin or host is None or host == rec.node:
            out.append((rec, obs))
            continue
        moved = [
            o
            if "logged_on" in o.attrs or o.node != rec.node
            else o.moved(host, {**o.attrs, "logged_on": rec.node, **label})
            for o in obs
        ]
        out.append((rec, moved))
    return out


_ECHO_LINES = 40  # an echo follows (or precedes) the host-named line closely


def _follow_echoes(
    per_record: list[tuple[RawRecord, list[Fact]]], ctx: ExecutionContext | None
) -> list[tuple[RawRecord, list[Fact]]]:
    """In a file that mixes several hosts' output, a host-less line that repeats a host-named
    line's event (same parser, same file, same known time, within a few lines) is that event's
    echo: NCCL's `node-b:pid:tid [5] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'`
    followed by the rank's `DistBackendError ... Last error: Cuda failure 'uncorrectable ECC error
    encountered'`. The echo moves to the named host (attrs.logged_on = the file's node) when
    exactly one host was named nearby."""
    if ctx is None:
        return per_record
    named: dict[tuple[str, str, Any], list[tuple[int, str]]] = {}
    job_nodes = set(ctx.nodes)
    for rec, obs in per_record:
        path, line = rec.locator.stream, rec.locator.position
        for o in obs:
            if (
                line is not None
                and o.time is not None
                and o.attrs.get("logged_on") == rec.node
                and o.node != rec.node
                and o.node in job_nodes
            ):
                named.setdefault((path, o.parser, o.time), []).append((line, o.node))
    if not named:
        return per_record
    out: list[tuple[RawRecord, list[Fact]]] = []
    for rec, obs in per_record:
        path, line = rec.locator.stream, rec.locator.position
        moved = []
        for o in obs:
            near = named.get((path, o.parser, o.time)) if line is not None else None
            hosts = {h for ln, h in near or [] if abs(ln - line) <= _ECHO_LINES}  # type: ignore[operator]
            if len(hosts) == 1 and o.node == rec.node and "logged_on" not in o.attrs:
                host = next(iter(hosts))
                o = o.moved(host, {**o.attrs, "logged_on": rec.node})
            moved.append(o)
        out.append((rec, moved))
    return out


# what marks an observation as an Event's, and times it

"""The parent's per-record cost, cut without changing a result (issue 16, fourth pass).

Each shortcut here replaced an algorithm; each is compared with the plain one it replaced:
`strip_prefix` skips its regex on lines no prefix can start, the NCCL origin is looked for
only where its `:pid:tid [dev] ` is, torchrun's summary fields are stripped only when they
do not read as fields unstripped, relabelling reads a record's prefixes only when asked,
the silence test looks up last lines only when a node is to be tested, and the parsers of a
line share its stripped form. Over every sample and held-out case, the observations and the
verdict are the same with the plain versions patched back in. (The summary block's header
and `[N]:` search is compared with a plain reading in test_decoder_child_failed.py.) The
cycle collector's pause is checked to restore what it found.
"""

from __future__ import annotations

import gc
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from test_grouping import CASES  # every sample and held-out case with logs

from attribution_dagster import pipeline
from attribution_dagster.core.context import JobState
from attribution_dagster.core.gcpause import gc_paused
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules import matcher, parsers
from attribution_dagster.rules import origins as O
from attribution_dagster.rules.decoders import launcher, prefixes
from attribution_dagster.rules.engine import peers as P


def plain_strip(line: str) -> str:
    """`strip_prefix` before the first-character test: the prefix regex on every line."""
    if line[:1] in "{ \t":
        msg = prefixes.json_message(line)
        if msg is not None:
            line = msg.split("\n", 1)[0]
    m = prefixes._PREFIX.match(line)
    return line[m.end() :] if m and m.end() else line


def plain_nccl_origin(line: str) -> re.Match[str] | None:
    return O._NCCL_ORIGIN.match(line)


def plain_fields(self: Any, start: int) -> dict[str, str]:
    """torchrun's summary fields as read before: every line stripped, a lazy value group."""
    field = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*?)\s*$")
    seen: dict[str, str] = {}
    for i in range(start + 1, len(self.raw)):
        ln = plain_strip(self.raw[i])
        m = field.match(ln)
        if m and m.group(1) not in seen:
            seen[m.group(1)] = m.group(2)
        if seen and ln.strip().startswith("===="):
            break
    return seen


def _log_lines() -> list[str]:
    lines: list[str] = []
    for case in CASES:
        for f in sorted((case / "logs").rglob("*")):
            if f.is_file():
                lines += f.read_text(encoding="utf-8", errors="replace").split("\n")
    for spec in pipeline.catalog().parsers:
        for ex in spec.spec.examples:
            lines += [ex.line, *ex.context]
    return lines


# line starts that each branch of the prefix regex (and none) begins with, Unicode digits and
# blanks among them: `\d` and `\s` are Unicode classes
STARTS = [
    "",
    " ",
    "  ",
    "\t",
    "       ",
    "\u3000",
    "\x0b",
    "\u00a0",
    "7",
    "\u0663",
    "\u00b2",
    "12",
    " 3",
    "      4",
    "       5",
    "[",
    "(",
    "{",
    " {",
    "N",
    "Nov",
    "Z",
    "a",
    "=",
    "-",
    "\u00c9",
]
PIECES = [
    "0: ",
    "115: ",
    "[rank3]:",
    "[default1]: ",
    "[1,7]<stderr>:",
    "(Worker pid=12, ip=10.0.0.1) ",
    "(raylet) ",
    "[pod/p-0/c] ",
    "2026-11-02T10:40:50.123Z ",
    "Nov  2 10:40:50 node-a kernel: ",
    "[Mon Nov  2 10:40:50 2026] ",
    "[ 1234.567890] ",
    "stderr F ",
    "node-a:42:43 [3] ",
    "host      : node-b",
    "NCCL WARN x",
    "Root Cause",
    "[0]:",
    "====",
    "\r",
    " ",
    '{"log": "',
]


def _fuzzed(n: int) -> list[str]:
    rng = random.Random(16)
    out = []
    for _ in range(n):
        parts = [rng.choice(STARTS)] + [rng.choice(PIECES) for _ in range(rng.randrange(4))]
        out.append("".join(parts))
    return out


def test_strip_prefix_is_the_plain_reading_on_every_line() -> None:
    lines = _log_lines() + _fuzzed(20000)
    changed = sum(plain_strip(ln) != ln for ln in lines)
    assert changed > 1000  # not vacuous: many of these lines carry prefixes
    assert [prefixes.strip_prefix(ln) for ln in lines] == [plain_strip(ln) for ln in lines]


def test_the_nccl_origin_is_found_where_the_plain_regex_finds_it() -> None:
    lines = _log_lines() + _fuzzed(20000)
    found = 0
    for ln in lines:
        new, old = O.nccl_origin(ln), plain_nccl_origin(ln)
        assert (new and new.span(), new and new.groupdict()) == (
            old and old.span(),
            old and old.groupdict(),
        ), ln
        found += old is not None
    assert found > 50


def _result(case: Path) -> tuple[list[dict], dict]:
    ctx = pipeline.load_context(case)
    settings = AnalysisSettings()
    raw = pipeline.collect_evidence(case, ctx, settings)
    obs = pipeline.normalize(raw, ctx)
    result = pipeline.attribute(ctx, obs, raw.coverage, settings, topology=raw.topology)
    verdict = result.model_dump(mode="json", exclude={"analyzed_at"})
    return [o.model_dump(mode="json") for o in obs], verdict


def plain_silent_nodes(ctx, observations, causes, symptoms, notes, classify, tuning, pointed):
    """`silent_nodes` as it was: every node's last line looked up first, whatever follows."""
    seen = P.last_seen(observations, ctx.nodes)
    gap = tuning.silence_seconds
    named_down = [
        P.home(i, ctx)
        for i in causes
        if i.rule.category == "node.down" and i.rule.locates and i.rule.weight >= 70
    ]
    ended = {
        i.obs.node
        for i in causes + symptoms
        if i.obs.kind in P.ENDING_KINDS and "logged_on" not in i.obs.attrs
    }
    targets = list(dict.fromkeys(([pointed] if pointed else []) + named_down))
    targets = [n for n in targets if n not in ended]
    theirs = P.Theirs(seen)
    found = [(n, tail) for n in targets if (tail := P.silent(n, seen, ctx.end, gap, theirs))]
    if not found and ctx.state is JobState.NODE_FAIL:
        quiet = [
            (n, tail)
            for n in ctx.nodes
            if n not in ended and (tail := P.silent(n, seen, ctx.end, gap, theirs))
        ]
        if len(quiet) == 1:
            found = quiet
    for node, tail in found:
        others = sorted(
            P.utc(o.time) for n in seen if n != node and (o := P.latest(seen, n)) is not None
        )
        obs = P._silence(node, tail, others)
        rule = classify(obs)
        if rule is None or rule.role != "cause":
            continue
        t, t_hi = P.utc(tail.time), P.latest_time(tail)
        causes.append(P.Item(obs, rule, t, 0.0, t, t_hi))
        when = P.hms(t) if t_hi == t else f"{P.hms(t)}..{P.hms(t_hi)}"
        notes.append(
            f"{node} stopped writing at {when} while the other nodes went on "
            f"(median last line {obs.attrs['others_until']})"
        )


def plain_relabel(per_record, ctx, origin_of):
    """`_relabel_by_origin` as it was: every record's prefixes read up front."""
    if ctx is None:
        return per_record
    tasks: dict = {}
    ranks = dict(O.learn_ranks(ctx, (o for _, obs in per_record for o in obs)))
    found: list = []

    def claim(table, key, node):
        table[key] = node if table.get(key, node) == node else None

    job_nodes = set(ctx.nodes)
    for rec, obs in per_record:
        origin = origin_of(rec.text) if obs else {}
        found.append(origin)
        path = rec.locator.stream
        for o in obs:
            if o.node not in job_nodes:
                continue
            spec = o.attrs.get("tasks")
            if isinstance(spec, str) and o.attrs.get("host") is not None:
                if O._resolve_host(str(o.attrs["host"]), ctx):
                    for t in O._task_ids(spec):
                        claim(tasks.setdefault(path, {}), t, o.node)
            elif "logged_on" in o.attrs and "host" not in origin:
                if "task" in origin:
                    claim(tasks.setdefault(path, {}), origin["task"], o.node)
                if "rank" in origin:
                    claim(ranks, origin["rank"], o.node)
    if not any(tasks.values()) and not any(ranks.values()):
        return per_record
    out = []
    for (rec, obs), origin in zip(per_record, found, strict=True):
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


original_match = matcher.Parser.match


def unshared_match(self: Any, line: str, text: str, stripped: Any = None) -> Any:
    """Each parser strips the line itself (the line's parsers shared none of it)."""
    return original_match(self, line, text)


def _plain(m: pytest.MonkeyPatch) -> None:
    m.setattr(matcher.Parser, "match", unshared_match)
    for mod in (prefixes, launcher, matcher):
        m.setattr(mod, "strip_prefix", plain_strip)
    m.setattr(parsers, "nccl_origin", plain_nccl_origin)
    m.setattr(launcher._Block, "fields", plain_fields)
    m.setattr(launcher, "signal_name", launcher.signal_name.__wrapped__)
    m.setattr(P, "silent_nodes", plain_silent_nodes)
    m.setattr(parsers, "_relabel_by_origin", plain_relabel)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_every_case_gives_the_same_observations_and_verdict_as_the_plain_code(
    case: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _result(case)
    with monkeypatch.context() as m:
        _plain(m)
        plain = _result(case)
    assert fast[0] == plain[0]
    assert json.dumps(fast[1], sort_keys=True) == json.dumps(plain[1], sort_keys=True)


def test_the_plain_versions_are_the_ones_running_when_patched(monkeypatch) -> None:
    """The comparison above is not vacuous: under the patch the plain code runs (summary
    blocks read, NCCL origins looked for, records relabelled, silence tested)."""
    calls: dict[str, int] = {"strip": 0, "fields": 0, "nccl": 0, "relabel": 0, "silent": 0}

    def counting(name: str, fn: Any) -> Any:
        def counted(*a: Any) -> Any:
            calls[name] += 1
            return fn(*a)

        return counted

    with monkeypatch.context() as m:
        _plain(m)
        m.setattr(launcher, "strip_prefix", counting("strip", plain_strip))
        m.setattr(launcher._Block, "fields", counting("fields", plain_fields))
        m.setattr(parsers, "nccl_origin", counting("nccl", plain_nccl_origin))
        m.setattr(parsers, "_relabel_by_origin", counting("relabel", plain_relabel))
        m.setattr(P, "silent_nodes", counting("silent", plain_silent_nodes))
        for case in CASES[:12]:
            _result(case)
    assert all(n > 0 for n in calls.values()), calls


def test_gc_paused_restores_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():  # nested: still off, and back on only when the outer one ends
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_gc_paused_turns_the_collector_back_on_after_an_error() -> None:
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()

"""torchrun's failure summary block (decoder `child_failed`), read the cheap way.

A large job's fallout holds one ChildFailedError per rank (8,192 in the watchdog profile),
each read with its 32 following lines. The decoder strips line prefixes only from lines that
can be the root-cause header or a failure's `[N]:` (a stripped line is a suffix of the line,
a JSON log line aside). Here it is compared with the plain reading, every line stripped,
on blocks with every kind of prefix, JSON lines, several failures and none.
"""

from __future__ import annotations

import copy
import json
import random
import re
from typing import Any

from attribution_dagster.rules.decoders import DECODERS
from attribution_dagster.rules.decoders.launcher import signal_name
from attribution_dagster.rules.decoders.prefixes import strip_prefix

DECODE = DECODERS["child_failed"]


def plain(text: str, draft: dict[str, Any]) -> bool:
    """The plain reading: every line without its prefix, then the block read from there."""
    lines = [strip_prefix(ln) for ln in text.split("\n")]
    start = next(
        (i for i, ln in enumerate(lines) if "Root Cause (first observed failure)" in ln), 0
    )
    attrs = draft["attrs"]
    attrs["failures"] = sum(1 for ln in lines if re.match(r"^\s*\[\d+\]:\s*$", ln))
    seen: dict[str, str] = {}
    field = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*?)\s*$")
    for ln in lines[start + 1 :]:
        m = field.match(ln)
        if m and m.group(1) not in seen:
            seen[m.group(1)] = m.group(2)
        if ln.strip().startswith("====") and seen:
            break
    if "host" in seen:
        attrs["host"] = draft["node_host"] = seen["host"]
    if "rank" in seen and (m := re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", seen["rank"])):
        attrs["rank"] = int(m.group(1))
        if m.group(2):
            attrs["local_rank"] = int(m.group(2))
    if "exitcode" in seen and (m := re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", seen["exitcode"])):
        code = attrs["exit_code"] = draft["fields"]["code"] = int(m.group(1))
        if m.group(2):
            attrs["pid"] = int(m.group(2))
        if code < 0:
            attrs["signal"], attrs["signal_name"] = -code, signal_name(-code)
    if "traceback" in seen and (m := re.search(r"Signal (\d+) \((SIG\w+)\)", seen["traceback"])):
        attrs["signal"], attrs["signal_name"] = int(m.group(1)), m.group(2)
    if "time" in seen:
        attrs["failed_at"] = seen["time"]
    parts = [lines[0].strip()] + [f"{k}: {v}" for k, v in seen.items() if k != "error_file"]
    draft["excerpt"] = " | ".join(parts)
    return True


def block(rank: int, failures: int = 1, root: bool = True) -> list[str]:
    lines = [
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "=" * 60,
        "train.py FAILED",
        "-" * 60,
        "Failures:",
    ]
    for k in range(1, failures):
        lines += [f"[{k}]:", f"  time      : 2026-11-02_10:40:5{k}", f"  rank      : {rank + k}"]
    if failures == 1:
        lines.append("  <NO_OTHER_FAILURES>")
    lines.append("-" * 60)
    if root:
        lines.append("Root Cause (first observed failure):")
    lines += [
        "[0]:",
        "  time      : 2026-11-02_10:40:50",
        "  host      : node-0954",
        f"  rank      : {rank} (local_rank: {rank % 8})",
        "  exitcode  : -6 (pid: 24321)",
        "  error_file: <N/A>",
        "  traceback : Signal 6 (SIGABRT) received by PID 24321",
        "=" * 60,
    ]
    return lines


PREFIXES = [
    lambda ln, r: ln,
    lambda ln, r: f"[rank{r}]:{ln}",
    lambda ln, r: f"[default{r % 8}]:{ln}",
    lambda ln, r: f"{r:>3}: {ln}",
    lambda ln, r: f"2026-11-02T10:40:50.123Z stderr F {ln}",
    lambda ln, r: f"Nov  2 10:40:50 node-0954 torchrun[4242]: {ln}",
    lambda ln, r: json.dumps({"log": ln + "\n", "stream": "stderr"}),
    lambda ln, r: "  " + json.dumps({"msg": f"[rank{r}]:{ln}"}),
    lambda ln, r: ln + " {not json}",
    lambda ln, r: f"[rank{r}]:{ln} \r",  # CRLF logs, trailing blanks
]


def decoded(fn: Any, text: str) -> dict[str, Any]:
    draft: dict[str, Any] = {"fields": {}, "attrs": {}}
    assert fn(copy.deepcopy({}), text, draft) is True
    return draft


def test_the_block_reads_as_the_plain_reading_whatever_the_prefixes() -> None:
    rng = random.Random(16)
    compared = 0
    for _trial in range(400):
        rank = rng.randrange(8192)
        lines = block(rank, failures=rng.choice([1, 1, 2, 3]), root=rng.random() < 0.8)
        lines += block(rank + 1)[: rng.randrange(12)]  # the next rank's block, cut at 33 lines
        style = rng.choice(PREFIXES)
        mixed = rng.random() < 0.3
        text = "\n".join((rng.choice(PREFIXES) if mixed else style)(ln, rank) for ln in lines[:33])
        assert decoded(DECODE, text) == decoded(lambda g, t, d: plain(t, d), text), text
        compared += 1
    assert compared == 400


def test_a_rank_prefixed_failure_line_counts_and_the_root_block_is_read() -> None:
    text = "\n".join(f"[rank5]:{ln}" for ln in block(5, failures=2))
    d = decoded(DECODE, text)
    assert d["attrs"]["failures"] == 2
    assert d["attrs"]["rank"] == 5 and d["attrs"]["local_rank"] == 5
    assert d["node_host"] == "node-0954" and d["fields"]["code"] == -6


def test_a_block_in_json_log_lines_is_read_through_the_message() -> None:
    text = "\n".join(json.dumps({"log": ln, "time": "2026-11-02T10:40:50Z"}) for ln in block(9))
    d = decoded(DECODE, text)
    assert d["attrs"]["rank"] == 9 and d["attrs"]["signal_name"] == "SIGABRT"
    assert d["attrs"]["failures"] == 1
    assert d["excerpt"].startswith("torch.distributed.elastic.multiprocessing.errors.Child")


def test_without_a_root_cause_section_the_first_failure_listed_is_read() -> None:
    text = "\n".join(f"[rank3]:{ln}" for ln in block(3, failures=2, root=False))
    d = decoded(DECODE, text)
    assert d == decoded(lambda g, t, dr: plain(t, dr), text)
    assert d["attrs"]["rank"] == 4 and d["attrs"]["failures"] == 2  # `[1]:` comes first

"""Launcher decoders: srun / torchrun exits and signals, torchrun's failure summary, ranks.

Ranks matter to the engine: a peer named by rank resolves to a host through NCCL's rank map.
"""

from __future__ import annotations

import functools
import re
import signal as _signal

from attribution_dagster.rules.decoders.prefixes import strip_prefix
from attribution_dagster.rules.decoders.registry import Draft, decoder


@functools.lru_cache(maxsize=256)
def signal_name(num: int) -> str | None:
    """`SIGABRT` for 6 (remembered: 8,192 ranks' summaries name the same few signals)."""
    try:
        return _signal.Signals(num).name
    except ValueError:
        return None


@decoder("exit_signal", attrs=["signal", "signal_name"])
def decode_exit_signal(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Negative exit codes (torchrun) are signals; srun `Killed`/`Segmentation fault` too."""
    attrs = draft["attrs"]
    code = attrs.get("exit_code")
    if isinstance(code, int) and code < 0:
        attrs["signal"] = -code
        attrs["signal_name"] = signal_name(-code)
    how = groups.get("how") or ""
    named = {
        "Killed": 9,
        "Terminated": 15,
        "Segmentation fault": 11,
        "Aborted": 6,
        "Bus error": 7,
    }
    for word, num in named.items():
        if how.startswith(word):
            attrs["signal"] = num
            attrs["signal_name"] = signal_name(num)
    if isinstance(code, int) and code > 128 and "signal" not in attrs:
        attrs["signal"] = code - 128
        attrs["signal_name"] = signal_name(code - 128)
    return True


_ROOT_TEXT = "Root Cause (first observed failure)"
_FAILURE_HEAD = re.compile(r"^\s*\[\d+\]:\s*$")  # `[0]:`, one per failure listed
# where in the text such lines can be (before their prefixes are stripped): the root-cause
# text, a line ending in `]:`; a JSON log line (read through its message) is no suffix
_HEAD_AT = re.compile(r"\]:[^\S\n]*$", re.M)
# a field's value is the rest of its line without trailing blanks (`.rstrip()`: a lazy
# `(.*?)\s*$` tries the line's end after every character)
_BLOCK_FIELD = re.compile(r"\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*)")
_RANK_TXT = re.compile(r"(\d+)(?: \(local_rank: (\d+)\))?")
_EXIT_TXT = re.compile(r"(-?\d+)(?: \(pid: (\d+)\))?")
_SIGNAL_TXT = re.compile(r"Signal (\d+) \((SIG\w+)\)")


def _jsonish(line: str) -> bool:
    """A JSON log line: its message, not a suffix of the line, is what `strip_prefix` reads."""
    return line.lstrip(" \t")[:1] == "{"


def _has_json_line(text: str) -> bool:
    """Does a line of `text` start (after spaces / tabs) with `{`?"""
    i = text.find("{")
    while i != -1:
        if not text[text.rfind("\n", 0, i) + 1 : i].strip(" \t"):
            return True
        i = text.find("{", i + 1)
    return False


class _Block:
    """A ChildFailedError line and its 32 following lines (8,192 of them in a large job's
    fallout), each line stripped of its prefixes only when read, once. A stripped line is a
    suffix of the line (a JSON line aside): a line without the root-cause text, or not
    ending in `]:`, cannot be the root-cause header or a failure's `[N]:`, so those are
    found in the whole text first and only the lines found are stripped."""

    def __init__(self, text: str) -> None:
        self.text, self.raw = text, text.split("\n")
        self._stripped: dict[int, str] = {}

    def line(self, i: int) -> str:
        s = self._stripped.get(i)
        if s is None:
            s = self._stripped[i] = strip_prefix(self.raw[i])
        return s

    def root_and_failures(self) -> tuple[int | None, int]:
        """The root-cause header's line (None: not in view) and how many `[N]:` lines."""
        text, line = self.text, self.line
        if not _has_json_line(text):  # the usual case: lines found in the text, in order
            start = None
            at = text.find(_ROOT_TEXT)
            while at != -1:
                i = text.count("\n", 0, at)
                if _ROOT_TEXT in line(i):
                    start = i
                    break
                at = text.find(_ROOT_TEXT, at + 1)
            heads = 0
            for m in _HEAD_AT.finditer(text):
                if _FAILURE_HEAD.match(line(text.count("\n", 0, m.start()))):
                    heads += 1
            return start, heads
        roots = (i for i, ln in enumerate(self.raw) if _ROOT_TEXT in ln or _jsonish(ln))
        start = next((i for i in roots if _ROOT_TEXT in self.line(i)), None)
        heads = sum(
            1
            for i, ln in enumerate(self.raw)
            if (ln.rstrip().endswith("]:") or _jsonish(ln)) and _FAILURE_HEAD.match(self.line(i))
        )
        return start, heads

    def fields(self, start: int) -> dict[str, str]:
        """`time`, `host`, `rank`, ... of the failure after line `start`, up to its `====`.
        A line that reads as a field as it is has no prefix (it starts with blanks and a
        key: no prefix, no JSON, starts so), so only the other lines are stripped."""
        seen: dict[str, str] = {}
        field = _BLOCK_FIELD.match
        for raw in self.raw[start + 1 :]:
            m = field(raw)
            ln = raw
            if m is None:
                ln = strip_prefix(raw)
                if ln is not raw:
                    m = field(ln)
            if m is not None:  # a field line is no `====` line
                if m[1] not in seen:
                    seen[m[1]] = m[2].rstrip()
            elif seen and ln.strip().startswith("===="):
                break
        return seen


@decoder(
    "child_failed",
    attrs=[
        "host",
        "rank",
        "local_rank",
        "exit_code",
        "pid",
        "signal",
        "signal_name",
        "failed_at",
        "failures",
    ],
)
def decode_child_failed(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Read the torchrun summary block that follows a ChildFailedError line, when present."""
    block = _Block(text)
    start, failures = block.root_and_failures()
    attrs = draft["attrs"]
    attrs["failures"] = failures
    # no root-cause section in view: fall back to the first failure listed, if any
    seen = block.fields(start if start is not None else 0)
    if "host" in seen:
        attrs["host"] = seen["host"]
        draft["node_host"] = seen["host"]
    if "rank" in seen:
        m = _RANK_TXT.match(seen["rank"])
        if m:
            attrs["rank"] = int(m.group(1))
            if m.group(2):
                attrs["local_rank"] = int(m.group(2))
    if "exitcode" in seen:
        m = _EXIT_TXT.match(seen["exitcode"])
        if m:
            code = int(m.group(1))
            attrs["exit_code"] = code
            draft["fields"]["code"] = code
            if m.group(2):
                attrs["pid"] = int(m.group(2))
            if code < 0:
                attrs["signal"] = -code
                attrs["signal_name"] = signal_name(-code)
    if "traceback" in seen:
        m = _SIGNAL_TXT.search(seen["traceback"])
        if m:
            attrs["signal"] = int(m.group(1))
            attrs["signal_name"] = m.group(2)
    if "time" in seen:
        attrs["failed_at"] = seen["time"]
    parts = [block.line(0).strip()] + [f"{k}: {v}" for k, v in seen.items() if k != "error_file"]
    draft["excerpt"] = " | ".join(parts)
    return True


_GLOBAL_RANK = re.compile(r"\[rank(\d{1,7})\]:")
_PG_RANK = re.compile(r"\[(?:PG (?:ID )?(\d{1,6})[^\]]{0,200}?)?Rank (\d{1,7})\]")


@decoder("torch_ranks", attrs=["global_rank", "rank", "pg"])
def decode_torch_ranks(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """`[rankN]:` is the global rank (torchrun prefix); `[PG x Rank N]` the process-group rank."""
    attrs = draft["attrs"]
    g = _GLOBAL_RANK.search(text)
    if g:
        attrs["global_rank"] = int(g.group(1))
    if "rank" not in attrs:
        r = _PG_RANK.search(text)
        if r:
            attrs["rank"] = int(r.group(2))
            if r.group(1) is not None and "pg" not in attrs:
                attrs["pg"] = int(r.group(1))
    return True


@decoder("peer_ranks", attrs=["peer_rank"])
def decode_peer_ranks(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """The first rank a message names: the peer the engine resolves to a host."""
    first = re.match(r"\d+", groups.get("ranks") or "")
    if first is None:
        return False
    draft["attrs"]["peer_rank"] = int(first.group(0))
    return True


# --- torchfrtrace (hangs) -------------------------------------------------------------------
_FR_GROUP = re.compile(r"^\s*group info: (?P<pg>[^:\s]{1,40})", re.M)
_FR_OP = re.compile(r"^\s*collective: (?P<op>\S{1,80})", re.M)
_FR_MISSING = re.compile(r"^\s*missing ranks: \{(?P<ranks>[\d, ]{1,4000})\}", re.M)


@decoder("torchfrtrace_block", attrs=["ranks", "pg", "op"])
def decode_torchfrtrace_block(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """torchfrtrace's `Not all ranks joining collective ...` block: the following lines say
    `group info: 0:default_pg`, `collective: nccl:all_reduce`, `missing ranks: {1}`. No
    `missing ranks` line in the block: nothing to say (the block was cut)."""
    body = text.split("\n", 9)
    block = "\n".join(body[1:9])
    m = _FR_MISSING.search(block)
    if m is None:
        return False
    attrs = draft["attrs"]
    attrs["ranks"] = m.group("ranks").strip()
    g = _FR_GROUP.search(block)
    if g:
        attrs["pg"] = g.group("pg")
    op = _FR_OP.search(block)
    if op:
        attrs["op"] = op.group("op")
    return True

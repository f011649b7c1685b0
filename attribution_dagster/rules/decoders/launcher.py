"""Launcher decoders: srun / torchrun exits and signals, torchrun's failure summary, ranks.

Ranks matter to the engine: a peer named by rank resolves to a host through NCCL's rank map.
"""

from __future__ import annotations

import re
import signal as _signal

from attribution_dagster.rules.decoders.prefixes import strip_prefix
from attribution_dagster.rules.decoders.registry import Draft, decoder


def signal_name(num: int) -> str | None:
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


_ROOT = re.compile(r"Root Cause \(first observed failure\)")
_BLOCK_FIELD = re.compile(r"^\s*(time|host|rank|exitcode|error_file|traceback)\s*:\s*(.*?)\s*$")
_SIGNAL_TXT = re.compile(r"Signal (\d+) \((SIG\w+)\)")


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
    lines = [strip_prefix(ln) for ln in text.split("\n")]
    start = next((i for i, ln in enumerate(lines) if _ROOT.search(ln)), None)
    attrs = draft["attrs"]
    attrs["failures"] = sum(1 for ln in lines if re.match(r"^\s*\[\d+\]:\s*$", ln))
    if start is None:
        # no root-cause section in view: fall back to the first failure listed, if any
        start = 0
    seen: dict[str, str] = {}
    for ln in lines[start + 1 :]:
        m = _BLOCK_FIELD.match(ln)
        if m and m.group(1) not in seen:
            seen[m.group(1)] = m.group(2)
        if ln.strip().startswith("====") and seen:
            break
    if "host" in seen:
        attrs["host"] = seen["host"]
        draft["node_host"] = seen["host"]
    if "rank" in seen:
        m = re.match(r"(\d+)(?: \(local_rank: (\d+)\))?", seen["rank"])
        if m:
            attrs["rank"] = int(m.group(1))
            if m.group(2):
                attrs["local_rank"] = int(m.group(2))
    if "exitcode" in seen:
        m = re.match(r"(-?\d+)(?: \(pid: (\d+)\))?", seen["exitcode"])
        if m:
            attrs["exit_code"] = int(m.group(1))
            draft["fields"]["code"] = int(m.group(1))
            if m.group(2):
                attrs["pid"] = int(m.group(2))
            if int(m.group(1)) < 0:
                attrs["signal"] = -int(m.group(1))
                attrs["signal_name"] = signal_name(-int(m.group(1)))
    if "traceback" in seen:
        m = _SIGNAL_TXT.search(seen["traceback"])
        if m:
            attrs["signal"] = int(m.group(1))
            attrs["signal_name"] = m.group(2)
    if "time" in seen:
        attrs["failed_at"] = seen["time"]
    parts = [lines[0].strip()] + [f"{k}: {v}" for k, v in seen.items() if k != "error_file"]
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

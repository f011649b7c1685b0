"""Slurm hostlists (`gpu-[001-004,010],dgx7`): the one expander every layer uses.

Slurm prints node sets compressed: sacct's `NodeList`, slurmctld's log lines, and
topology.conf / `scontrol show topology` (`Nodes=`, `Switches=`). The well-known library,
python-hostlist, is GPL-2.0+; this project is Apache-2.0, so the few lines live here.

`expand_hostlist` is strict (ValueError on a malformed expression: a scheduler record or a
topology file must not be guessed at); `expand_hostlist_lenient` keeps a part it cannot
expand as written (free-text log lines, where a bracket may be anything).
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
_GROUP = re.compile(r"\[([^\]]*)\]")
PLACEHOLDERS = frozenset({"None assigned", "(null)", "None", "N/A"})
MAX_RANGE = 1_000_000  # one range wider than this is a typo, not a cluster
HOSTLIST_MAX = 4096  # the lenient form's bound on the names one free-text expression gives


def split_hostlist(expr: str, *, strict: bool = False) -> list[str]:
    """The comma-separated parts, commas inside brackets kept: `cn-[01-02,05],gpu7` ->
    [`cn-[01-02,05]`, `gpu7`]. Strict: ValueError on unbalanced brackets."""
    out: list[str] = []
    depth, cur = 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                if strict:
                    raise ValueError(f"unbalanced ']' in hostlist {expr!r}")
                depth = 0
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth and strict:
        raise ValueError(f"unbalanced '[' in hostlist {expr!r}")
    out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


def _expand_ranges(body: str, expr: str, limit: int = MAX_RANGE) -> list[str]:
    """`001-003,010` -> [`001`, `002`, `003`, `010`]; the low bound's width sets the padding."""
    values: list[str] = []
    for part in body.split(","):
        m = _RANGE.match(part.strip())
        if not m:
            raise ValueError(f"bad range {part!r} in hostlist {expr!r}")
        lo, hi = m.group(1), m.group(2)
        if hi is None:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"descending range {part!r} in hostlist {expr!r}")
        if int(hi) - int(lo) >= limit:
            raise ValueError(f"range {part!r} in hostlist {expr!r} is too large")
        width = len(lo) if lo.startswith("0") else 0
        values.extend(str(i).zfill(width) for i in range(int(lo), int(hi) + 1))
    return values


def _expand_part(item: str, expr: str, limit: int = MAX_RANGE) -> list[str]:
    """One part: several bracket groups multiply (`a[1-2]-b[3-4]` -> a1-b3, a1-b4, ...)."""
    partial = [""]
    pos = 0
    for m in _GROUP.finditer(item):
        prefix = item[pos : m.start()]
        if "[" in prefix or "]" in prefix:
            raise ValueError(f"nested brackets in hostlist {expr!r}")
        values = _expand_ranges(m.group(1), expr, limit)
        partial = [p + prefix + v for p in partial for v in values]
        pos = m.end()
    tail = item[pos:]
    if "[" in tail or "]" in tail:
        raise ValueError(f"unbalanced brackets in hostlist {expr!r}")
    return [p + tail for p in partial]


def expand_hostlist(expr: str | None) -> list[str]:
    """Slurm's compressed host list to names, in order, without duplicates.

    `gpu-[001-004,010],dgx7` -> gpu-001..gpu-004, gpu-010, dgx7. Empty input and Slurm's
    placeholders (`None assigned`, `(null)`) give []. ValueError on a malformed expression.
    """
    if expr is None:
        return []
    expr = expr.strip()
    if not expr or expr in PLACEHOLDERS:
        return []
    names: dict[str, None] = {}
    for item in split_hostlist(expr, strict=True):
        names.update(dict.fromkeys(_expand_part(item, expr)))
    return list(names)


def expand_hostlist_lenient(expr: str) -> list[str]:
    """Like `expand_hostlist`, but a part it cannot expand (`node-[b-c]`, a range wider than
    HOSTLIST_MAX) is kept as written, and at most HOSTLIST_MAX names come back: for host
    names found in free text, where a bracket need not be a hostlist."""
    out: list[str] = []
    for part in split_hostlist(expr):
        try:
            names = _expand_part(part, expr, HOSTLIST_MAX)
        except ValueError:
            names = [part]
        out.extend(names if len(names) <= HOSTLIST_MAX else [part])
        if len(out) >= HOSTLIST_MAX:
            return out[:HOSTLIST_MAX]
    return out

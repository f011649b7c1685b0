"""Multi-pattern hit finders for the scanner: which lines of a block hold an anchor literal.

Hyperscan (one pass, Python sees only match end offsets) when importable, else one
prefix-factored `re` alternation; both give the same hit lines. `start` lets the scanner
skip regions it has accounted for otherwise (storm runs); it is always a line start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

from attribution_dagster.core.formats import startcache

try:  # optional: the x86_64 wheel; the `re` fallback gives identical records, slower
    import hyperscan as _hs
except ImportError:  # pragma: no cover - depends on the platform
    _hs = None

HYPERSCAN_IMPORTABLE = _hs is not None


def hyperscan_database(
    name: str, expressions: list[bytes], flags: list[int] | int, literal: bool = False
) -> Any:
    """A block-mode hyperscan database of `expressions` (ids 0..n-1), read from the start-up
    cache (core/formats/startcache.py) when one was compiled from the same arguments before: a
    compile costs milliseconds at every process start and in every scanner worker. Raises
    what hyperscan's compile raises."""
    if _hs is None:
        raise RuntimeError("hyperscan is not importable")
    n = len(expressions)
    key = startcache.digest(
        f"hyperscan {getattr(_hs, '__version__', '?')} block literal={literal} flags={flags!r}",
        *expressions,
    )
    blob = startcache.read_entry(f"{name}.hs", key)
    if blob is not None:
        try:
            db = _hs.loadb(blob, _hs.HS_MODE_BLOCK)
            db.scratch = _hs.Scratch(db)  # a deserialized database comes without one
            return db
        except Exception:  # noqa: BLE001 - another platform's or a damaged database
            pass
    db = _hs.Database(mode=_hs.HS_MODE_BLOCK)
    if literal:
        db.compile(expressions=expressions, ids=list(range(n)), elements=n, flags=flags,
                   literal=True)
    else:
        db.compile(expressions=expressions, ids=list(range(n)), elements=n, flags=flags)
    try:
        startcache.write_entry(f"{name}.hs", key, _hs.dumpb(db))
    except Exception:  # noqa: BLE001 - a database hyperscan cannot serialize: no cache
        pass
    return db


class Matcher(Protocol):
    def hit_lines(
        self, buf: bytearray, view: memoryview, limit: int, start: int = 0
    ) -> list[tuple[int, int]]:
        """(start, end) of each distinct line in buf[start:limit] holding an anchor (`start`
        is a line start); end is the index of its newline (or limit)."""
        ...


def _lines_of(buf: bytearray, limit: int, ends: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    cur_end = -1
    for e in ends:
        if e <= cur_end or e > limit:
            continue
        s = buf.rfind(b"\n", 0, e) + 1
        cur_end = buf.find(b"\n", e, limit)
        if cur_end < 0:
            cur_end = limit
        out.append((s, cur_end))
    return out


class HyperscanMatcher:
    """All literal hits in one hyperscan pass; Python sees only the match end offsets."""

    def __init__(self, literals: Sequence[bytes]) -> None:
        if _hs is None:
            raise RuntimeError("hyperscan is not importable")
        self._db = hyperscan_database("scan", list(literals), 0, literal=True)

    def hit_lines(
        self, buf: bytearray, view: memoryview, limit: int, start: int = 0
    ) -> list[tuple[int, int]]:
        ends: list[int] = []
        append = ends.append
        self._db.scan(
            view[start:limit],
            match_event_handler=lambda _i, _f, to, _fl, _c: append(to + start),
        )
        ends.sort()
        return _lines_of(buf, limit, ends)


def _trie_pattern(literals: Sequence[bytes]) -> bytes:
    """One alternation with common prefixes factored out (`NCCL WARN|NCCL INFO` becomes
    `NCCL (?:WARN|INFO)`): `re` tries far fewer branches per position, ~2x faster. A literal
    that extends a shorter one is dropped -- the shorter one already marks the line."""
    trie: dict = {}
    for lit in literals:
        node = trie
        for byte in lit:
            node = node.setdefault(byte, {})
        node[None] = {}

    def build(node: dict) -> bytes:
        if None in node:
            return b""
        alts = [re.escape(bytes([b])) + build(sub) for b, sub in sorted(node.items())]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return build(trie)


class RegexMatcher:
    """Fallback: one compiled (prefix-factored) alternation; after a hit, resume at the
    next line. Far slower than hyperscan on many literals, but gives the same hit lines."""

    def __init__(self, literals: Sequence[bytes]) -> None:
        self._rx = re.compile(_trie_pattern(literals))

    def hit_lines(
        self, buf: bytearray, view: memoryview, limit: int, start: int = 0
    ) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        search = self._rx.search
        pos = start
        while True:
            m = search(buf, pos, limit)
            if m is None:
                return out
            s = buf.rfind(b"\n", 0, m.start()) + 1
            e = buf.find(b"\n", m.end(), limit)
            if e < 0:
                e = limit
            out.append((s, e))
            pos = e + 1


class NoMatcher:
    """No anchors: nothing can be a hit (an empty alternation would match every line)."""

    def hit_lines(
        self, buf: bytearray, view: memoryview, limit: int, start: int = 0
    ) -> list[tuple[int, int]]:
        return []


def cover(literals: Sequence[bytes]) -> list[bytes]:
    """A few short substrings such that each literal holds one (greedy set cover): a window
    holding none of them holds no literal, found with fewer C-level searches. Progress
    literals share cores (`it/s]`, `it/s,`; `'loss': `, `loss=`, `train_loss`)."""
    left, cores = set(literals), []
    while left:
        cands = {lit[i : i + n] for lit in left for n in range(4, 9) for i in range(len(lit) - 3)}
        cands = {c for c in cands if len(c) >= 4}
        cands |= {lit for lit in left if len(lit) < 4}
        best = max(sorted(cands), key=lambda c: (sum(c in lit for lit in left), len(c)))
        cores.append(best)
        left = {lit for lit in left if best not in lit}
    return cores

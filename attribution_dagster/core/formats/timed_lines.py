"""The next timed line of a block, found with one hyperscan pass (the scanner's forward search).

An untimed hit (NCCL's `host:pid:tid [dev] NCCL INFO ...` lines carry no stamp) is bounded by
the next timed line of its file, and a block of NCCL chatter may hold none: `re` then tries
TIMED_LINE_START after each of the block's ~60,000 newlines (~10 ms per 4 MB). Hyperscan
runs a widened form of the same pattern over the block in ~2 ms and stops at the first
candidate, which `TIMED_LINE_START.match` confirms or rejects (then the pass goes on after
it). The widened pattern matches wherever the real one does: named groups become plain
groups, lookaheads are dropped and a JSON line (`{` after blanks) is always a candidate, so
`search` returns what `TIMED_LINE_START.search` returns (tests/core/formats/test_timed_lines.py).
Without hyperscan, or when it refuses the pattern, `re` does the search.
"""

from __future__ import annotations

import re
from typing import Any

from attribution_dagster.core.formats.matchers import HYPERSCAN_IMPORTABLE, hyperscan_database
from attribution_dagster.core.formats.timestamps import JSON_BRANCH, LINE_BODY, TIMED_LINE_START


def prefilter_pattern() -> bytes:
    """TIMED_LINE_START's pattern, widened as the module doc says."""
    body = LINE_BODY.replace(JSON_BRANCH, rb"\{", 1)
    body = re.sub(rb"\(\?P<\w+>", b"(?:", body)
    body = re.sub(rb"\(\?=[^()]*\)", b"", body)
    return b"\n" + body


def _first(_id: int, _from: int, to: int, _flags: int, found: list[int]) -> bool:
    found.append(to)
    return True  # stop at the first candidate


class TimedLineSearch:
    """`TIMED_LINE_START.search(buf, pos, limit)`, hyperscan finding the candidates."""

    def __init__(self, use_hyperscan: bool = True) -> None:
        self._db: Any = None
        if use_hyperscan and HYPERSCAN_IMPORTABLE:
            try:
                self._db = hyperscan_database("timed-lines", [prefilter_pattern()], [0])
            except Exception:  # noqa: BLE001 - a pattern hyperscan refuses: `re` searches
                self._db = None

    def search(self, buf: bytearray, pos: int, limit: int) -> re.Match[bytes] | None:
        if self._db is None:
            return TIMED_LINE_START.search(buf, pos, limit)
        view = memoryview(buf)
        try:
            while pos < limit:
                found: list[int] = []
                try:
                    self._db.scan(view[pos:limit], match_event_handler=_first, context=found)
                except Exception:  # noqa: BLE001 - hyperscan reports the stop as an error
                    if not found:  # a real one: `re` searches the rest
                        return TIMED_LINE_START.search(buf, pos, limit)
                if not found:
                    return None
                # the candidate starts at the last newline before its end (it holds no other)
                start = buf.rfind(b"\n", pos, pos + found[0])
                m = TIMED_LINE_START.match(buf, start, limit)
                if m is not None:
                    return m
                pos = start + 1
            return None
        finally:
            view.release()

"""The scanner's forward search for the next timed line (core/formats/timed_lines.py): the
hyperscan pass with its widened pattern must return exactly what `TIMED_LINE_START.search`
returns, from every start position, over lines of every stamp shape the scanner reads (and
near misses: invalid dates, stamps not at a line start, JSON lines without a time)."""

from __future__ import annotations

import random

import pytest

from attribution_dagster.core.formats.matchers import HYPERSCAN_IMPORTABLE
from attribution_dagster.core.formats.timed_lines import TimedLineSearch, prefilter_pattern
from attribution_dagster.core.formats.timestamps import TIMED_LINE_START

SHAPES = [
    "2026-11-02T10:00:{s:02d}.123Z INFO step {i}",
    "2026-11-02 10:00:{s:02d},123 ERROR NCCL WARN timeout {i}",
    "  2026-11-02 10:00:{s:02d}+02:00 indented {i}",
    "<13>1 2026-11-02T10:00:{s:02d}Z host app - - - rfc5424 {i}",
    "12: [rank3]: 2026-11-02 10:00:{s:02d} srun task and rank {i}",
    "Nov  2 10:00:{s:02d} node-a kernel: [612000.1] NVRM: Xid 79 {i}",
    "[Jul 23 2024 07:53:{s:02d}] [INFO] fabric manager {i}",
    "Mon Nov  2 10:00:{s:02d} 2026] dmesg -T line {i}",
    "E1102 10:00:{s:02d}.123456 1245483 ProcessGroupNCCL.cpp:697] glog {i}",
    "[rank3]:[E1102 10:00:{s:02d}.123456789 ProcessGroupNCCL.cpp:697] c10 {i}",
    '{{"time":"2026-11-02T10:00:{s:02d}Z","msg":"json {i}"}}',
    '{{"level":"info","ts":17000000{s:02d}.5,"msg":"zap {i}"}}',
    '{{"__REALTIME_TIMESTAMP":"17000000{s:02d}123456","MESSAGE":"journald {i}"}}',
    '{{"msg":"a json line with no time {i}"}}',  # a candidate the regex rejects
    "node-a:4000:4100 [{i}] NCCL INFO Channel 00/0 : 0[0] -> 1[1]",
    "node-a:4000:4100 [0] NCCL INFO comm 0x{i:x} rank {i} nRanks 8",
    "2026-13-45 10:00:{s:02d} not a date {i}",  # the regex matches; the date is invalid
    "Foo  2 10:00:{s:02d} not a month {i}",
    "no stamp but 2026-11-02 10:00:{s:02d} later in the line {i}",
    "E1302 10:00:{s:02d}.1 glog month 13 {i}",
    "",
    "\tNov 12 10:00:{s:02d} tab then syslog {i}",
    "caf\u00e9 non-ascii 10:00:{s:02d} {i}",
]


def _buffer(rng: random.Random, n: int, timed_share: float) -> bytearray:
    lines = []
    for i in range(n):
        if rng.random() < timed_share:
            shape = rng.choice(SHAPES)
        else:
            shape = rng.choice(SHAPES[14:16])  # untimed NCCL chatter
        lines.append(shape.format(s=rng.randint(0, 59), i=i))
    data = "\n".join(lines).encode()
    if rng.random() < 0.5:
        data = data.replace(b"Channel", b"Chan\r\x00el", 3)
    return bytearray(data + (b"\n" if rng.random() < 0.7 else b""))


def _span(m):  # type: ignore[no-untyped-def]
    return None if m is None else (m.start(), m.end(), m.group(0))


@pytest.mark.skipif(not HYPERSCAN_IMPORTABLE, reason="hyperscan wheel not available here")
def test_hyperscan_search_equals_the_regex_search_from_every_position() -> None:
    finder = TimedLineSearch(use_hyperscan=True)
    assert finder._db is not None  # the hyperscan path really runs
    rng = random.Random(23)
    for trial in range(40):
        buf = _buffer(rng, rng.randint(1, 120), rng.choice([0.02, 0.2, 0.8]))
        limit = len(buf) if trial % 3 else rng.randint(0, len(buf))
        positions = sorted({0, limit, *(rng.randint(0, max(0, limit)) for _ in range(40))})
        for pos in positions:
            want = _span(TIMED_LINE_START.search(buf, pos, limit))
            assert _span(finder.search(buf, pos, limit)) == want, (trial, pos, limit)


def test_the_widened_pattern_has_no_group_names_or_lookaheads() -> None:
    pattern = prefilter_pattern()
    assert pattern.startswith(b"\n") and b"(?P<" not in pattern and b"(?=" not in pattern


def test_without_hyperscan_the_regex_searches() -> None:
    finder = TimedLineSearch(use_hyperscan=False)
    buf = bytearray(b"node-a:1:2 [0] NCCL INFO x\nNov  2 10:00:01 node-a kernel: y\n")
    m = finder.search(buf, 0, len(buf))
    assert finder._db is None and m is not None and m.start() == buf.index(b"\nNov")

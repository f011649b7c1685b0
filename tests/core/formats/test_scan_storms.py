"""Storms counted per block (issue 16): a hot fold key's later repeats are counted with one
C-level regex pass per block and hidden from the hit finder. Every test scans the same bytes
with that path on and off (`ScanSpec.storm_blocks`) and asserts identical FileScans, and
that the block path really counted something where it should have (so a test cannot pass
by the block path silently never running)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

from attribution_dagster.core.formats.scan import FOLD_AFTER, FileScan, FileScanner, ScanSpec
from attribution_dagster.core.formats.storms import Storm

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
XID95 = "NVRM: Xid (PCI:0000:91:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x0). RST: Yes"
XID48 = "NVRM: Xid (PCI:0000:1b:00): 48, pid=9912, An uncorrectable double bit error"
LITERALS = ("NVRM: Xid", "NCCL WARN", "link down")


MODES: list[str] = []  # "runs" or "regex", one per storm and block (Storm.find)
_runs = Storm.runs


def _recorded_runs(self: Storm, buf: bytearray, limit: int) -> list[tuple[int, int]] | None:
    out = _runs(self, buf, limit)
    MODES.append("regex" if out is None else "runs")
    return out


Storm.runs = _recorded_runs  # type: ignore[method-assign]


class _Counting(FileScanner):
    """Records how many storm lines the block path counted (the sum of its passes)."""

    def __init__(self, spec: ScanSpec) -> None:
        super().__init__(spec)
        self.block_counted = 0
        self.recut = 0  # blocks ended early where a storm began (FileScanner._scan_block)

    def _scan_block(self, buf, view, limit, st, res):  # type: ignore[no-untyped-def]
        end = super()._scan_block(buf, view, limit, st, res)
        self.recut += end < limit
        return end

    def _hide_storms(self, buf, view, limit, st, res):  # type: ignore[no-untyped-def]
        before = sum(r[0] for r in res.repeats.values())
        hid = super()._hide_storms(buf, view, limit, st, res)
        if hid is not None:
            self.block_counted += sum(r[0] for r in res.repeats.values()) - before
        return hid


def _spec(block: int = 16384, **kw: object) -> ScanSpec:
    base = ScanSpec(
        literals=LITERALS,
        context_after=(0,) * len(LITERALS),
        window_start=T0 - timedelta(hours=1),
        window_end=T0 + timedelta(hours=1),
        reference=T0,
        block_size=block,
        fold_repeats=True,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def _stamp(t: datetime) -> str:
    return f"{t:%b} {t.day:2d} {t:%H:%M:%S}"


def _kern(t: datetime, k: int, msg: str, host: str = "node-a") -> str:
    return f"{_stamp(t)} {host} kernel: [{612000 + k // 1000:6d}.{k % 1000 * 997:06d}] {msg}"


def _both(data: bytes, **kw: object) -> tuple[FileScan, FileScan, int]:
    """The scan with the block path and without it, and how many lines the block counted."""
    MODES.clear()
    fast = _Counting(_spec(**kw))
    on = fast.scan_bytes(data)
    off = FileScanner(_spec(storm_blocks=False, **kw)).scan_bytes(data)
    return on, off, fast.block_counted


def _same(a: FileScan, b: FileScan) -> None:
    assert a.records == b.records
    assert a.repeats == b.repeats
    assert a.latest == b.latest
    assert a.tail == b.tail
    assert (a.lines, a.bytes, a.out_of_window) == (b.lines, b.bytes, b.out_of_window)
    assert dataclasses.asdict(a) == dataclasses.asdict(b)  # every other field as well


def test_pure_storm_is_counted_per_block_with_the_per_line_values() -> None:
    n = 3000
    lines = [_kern(T0 + timedelta(milliseconds=40 * k), k, XID95) for k in range(n)]
    data = ("\n".join(lines) + "\n").encode()
    on, off, counted = _both(data)
    _same(on, off)
    assert counted > n // 2  # most repeats never reached the per-line loop
    assert set(MODES) == {"runs"}  # back to back: found as runs
    assert len(on.records) == FOLD_AFTER
    kept = on.records[-1][0]
    count, last, t_last, text_last = on.repeats[kept]
    assert (count, last) == (n - FOLD_AFTER + 1, n)
    assert t_last == T0 + timedelta(seconds=(40 * (n - 1)) // 1000)
    assert text_last == lines[-1]
    assert on.tail == (n, t_last, lines[-1])


def test_storm_interleaved_with_other_hits_keeps_them_with_their_lines_and_times() -> None:
    """Other XIDs, NCCL warnings, untimed hits (inherited time, latest bound) and a quiet
    line between storm lines: all found at their line numbers, the storm still counted."""
    lines: list[str] = []
    expect: dict[int, tuple[datetime, str, str]] = {}  # line -> (time, quality, text)
    for k in range(4000):
        t = T0 + timedelta(milliseconds=25 * k)
        lines.append(_kern(t, k, XID95))
        if k % 97 == 5:
            lines.append(_kern(t, k, XID48 + f" seq {k}"))
            expect[len(lines)] = (t.replace(microsecond=0), "exact", lines[-1])
        if k % 211 == 7:
            lines.append(f"  rank {k}: NCCL WARN Cuda failure 'unhandled' (untimed)")
            expect[len(lines)] = (t.replace(microsecond=0), "inherited", lines[-1])
        if k % 13 == 0:
            lines.append(f"{_stamp(t)} node-a systemd[1]: Started session {k}.")
        if k % 500 == 100 or k == 3990:  # the storm's line with an ISO stamp: same fact
            lines.append(f"{t:%Y-%m-%dT%H:%M:%S}Z" + _kern(t, k, XID95)[15:])
    data = ("\n".join(lines) + "\n").encode()
    on, off, counted = _both(data, block=262144)
    _same(on, off)
    assert counted > 2000
    assert "regex" in MODES  # runs of about a dozen lines in a big block: the regex pass
    on, off, counted = _both(data)
    _same(on, off)
    assert counted > 2000 and "runs" in MODES  # fewer runs in a 16 KB block: found as runs
    got = {ln: (t, q, text) for ln, t, q, text in on.records if "Xid (PCI:0000:91" not in text}
    assert got == expect
    for ln, (_t, q, _text) in expect.items():  # an untimed hit's bound: the next timed line
        if q == "inherited":
            assert on.latest[ln] >= got[ln][0]
    storm = [r for r in on.records if "Xid (PCI:0000:91" in r[3]]
    assert len(storm) == FOLD_AFTER
    assert on.repeats[storm[-1][0]][0] + FOLD_AFTER - 1 == 4000 + 9
    assert on.repeats[storm[-1][0]][1] == len(lines) - (lines[-1].count("systemd") > 0)


def test_storm_across_block_boundaries_and_tiny_blocks() -> None:
    lines = [_kern(T0 + timedelta(milliseconds=300 * k), k, XID95) for k in range(1500)]
    lines[700:700] = [_kern(T0 + timedelta(seconds=210), 9, "NVRM: Xid (PCI:0000:91:00): 79")]
    data = ("\n".join(lines) + "\n").encode()
    for block in (1000, 4096, 5003, 65536):
        on, off, counted = _both(data, block=block)
        _same(on, off)
        assert counted > 900, block
        assert any(": 79" in r[3] and r[0] == 701 for r in on.records)


def test_storm_that_starts_before_the_window_and_ends_after_it() -> None:
    """The first storm lines are out of the window (counted, not kept), then kept and
    folded, then out again past the window end: blocks crossing an edge go per line."""
    n, step = 6000, timedelta(milliseconds=100)
    start = T0 - timedelta(hours=1, minutes=3)  # 180 s before the window start
    lines = [_kern(start + k * step, k, XID95) for k in range(n)]
    data = ("\n".join(lines) + "\n").encode()
    lo, hi = T0 - timedelta(hours=1), T0 - timedelta(hours=1) + timedelta(seconds=300)
    on, off, counted = _both(data, window_start=lo, window_end=hi)
    _same(on, off)
    assert counted > 1000
    stamps = [(start + k * step).replace(microsecond=0) for k in range(n)]
    inside = [k for k in range(n) if lo <= stamps[k] <= hi]
    assert on.out_of_window == n - len(inside)
    assert on.records[0][0] == inside[0] + 1
    count, last, t_last, _ = on.repeats[on.records[-1][0]]
    assert (count, last, t_last) == (len(inside) - FOLD_AFTER + 1, inside[-1] + 1, hi)


def test_same_message_from_another_host_or_shape_is_not_counted_as_the_storm() -> None:
    """A cluster file: node-006 logs node-005's message (a host differing in one digit),
    nodf-005 too (a letter), node-005 the same message on another GPU (one digit of the
    rest); a line holds it but no uptime, another the same bytes after a non-stamp, another
    the whole storm line after other bytes: none is a repeat of node-005's storm line; each
    stays a record of its own."""
    lines = []
    for k in range(3000):
        t = T0 + timedelta(milliseconds=50 * k)
        lines.append(_kern(t, k, XID95, host="node-005"))
        if k % 50 == 49:
            lines.append(_kern(t, k, XID95, host="node-006"))
        if k % 300 == 149:  # same length, a letter apart
            lines.append(_kern(t, k, XID95, host="nodf-005"))
        if k % 300 == 150:  # the storm's whole line after other bytes: not at a line start
            lines.append("junk " + _kern(t, k, XID95, host="node-005"))
        if k % 500 == 250:  # the same message on another GPU: one digit of the rest
            lines.append(_kern(t, k, XID95.replace("0000:91", "0000:92"), host="node-005"))
        if k == 2500:
            lines.append(f"{_stamp(t)} node-005 kernel: {XID95}")
        if k % 400 == 399:  # no stamp before the same bytes: untimed, a line of its own
            lines.append("x" + _kern(t, k, XID95, host="node-005")[15:])
    data = ("\n".join(lines) + "\n").encode()
    on, off, counted = _both(data)
    _same(on, off)
    assert counted > 1500
    assert sum("node-006" in r[3] for r in on.records) == 60  # each its own record
    assert sum("0000:92" in r[3] for r in on.records) == 6
    assert sum("nodf-005" in r[3] for r in on.records) == 10
    assert sum(r[3].startswith("junk") for r in on.records) == 10
    assert [c for c, *_ in on.repeats.values()] == [3000 - FOLD_AFTER + 1]
    assert any("kernel: NVRM" in r[3] for r in on.records)  # the uptime-less line
    assert sum(r[3].startswith("x node-005") for r in on.records) == 7
    # a month-day shape change mid-storm: the per-line path takes the new shape's lines
    nov9, nov10 = datetime(2026, 11, 9, 23, 59, 50, tzinfo=timezone.utc), T0 + timedelta(days=8)
    late = [_kern(nov9, k, XID95) for k in range(2000)]
    late += [_kern(nov10, k, XID95) for k in range(500)]
    data = ("\n".join(late) + "\n").encode()
    wide = {"window_start": T0, "window_end": T0 + timedelta(days=10)}
    on, off, counted = _both(data, **wide)
    _same(on, off)
    assert counted > 1000 and on.repeats[on.records[-1][0]][1] == 2500


def test_storm_of_iso_lines_without_an_uptime() -> None:
    """The variable part is the stamp alone (an application repeating one error)."""
    lines = [
        f"{T0 + timedelta(milliseconds=7 * k):%Y-%m-%dT%H:%M:%S.%f}Z ERROR rank 3: NCCL WARN "
        "NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129"
        for k in range(3000)
    ]
    data = ("\n".join(lines) + "\n").encode()
    on, off, counted = _both(data, block=8192)
    _same(on, off)
    assert counted > 1500
    assert on.repeats[on.records[-1][0]][2] == T0 + timedelta(milliseconds=7 * 2999)


def test_anchor_in_the_stamp_and_binary_lines_in_a_storm_block() -> None:
    """An anchor that matches the stamp keeps hidden storm lines hits (they are skipped,
    not counted twice); in a block holding a NUL line the regex pass is not used (NULs mark
    the filled lines of its copy): binary hits are counted, never records."""
    lines = []
    for k in range(3000):
        t = T0 + timedelta(milliseconds=40 * k)
        lines.append(_kern(t, k, XID95))
        if k % 700 == 350:
            lines.append("rank 1: NCCL WARN \x00\x01 binary junk")
        if k >= 2000:  # line by line with others: the regex pass (a copy with NULs)
            lines.append(f"{_stamp(t)} node-a systemd[1]: filler {k}")
    data = ("\n".join(lines) + "\n").encode()
    spec = {"literals": (*LITERALS, "Nov  2 10:0"), "context_after": (0,) * 4}
    for block in (16384, 131072):
        on, off, counted = _both(data, block=block, **spec)
        _same(on, off)
        assert counted > 1000
        binary = [i + 1 for i, line in enumerate(lines) if "\x00" in line]
        assert not any(r[0] in binary for r in on.records) and on.binary_lines == len(binary)
    assert "regex" in MODES


def test_two_storms_one_in_runs_one_line_by_line() -> None:
    """XID 95 comes back to back (runs), XID 48 every other line between fillers (the regex
    pass): both counted in the same blocks, filled into one copy for the hit finder."""
    lines: list[str] = []
    k = 0
    for rnd in range(12):
        for _ in range(300):
            lines.append(_kern(T0 + timedelta(milliseconds=10 * k), k, XID95))
            k += 1
        for j in range(150):
            t = T0 + timedelta(milliseconds=10 * k)
            lines.append(_kern(t, k, XID48))
            lines.append(f"{_stamp(t)} node-a systemd[1]: filler {rnd}.{j}")
            k += 1
    data = ("\n".join(lines) + "\n").encode()
    on, off, counted = _both(data, block=262144)
    _same(on, off)
    assert {"runs", "regex"} <= set(MODES)
    assert counted > 3000
    assert sorted(c for c, *_ in on.repeats.values()) == [
        12 * 150 - FOLD_AFTER + 1,
        12 * 300 - FOLD_AFTER + 1,
    ]


def test_a_block_where_a_storm_begins_ends_after_its_first_folded_line() -> None:
    """The storm's first block is cut after the line that made it a storm: the rest of that
    block is counted per block (not line by line), with the same FileScan as per line, at
    block sizes that cut it at different places."""
    lines = [f"{_stamp(T0)} node-a systemd[1]: Started session {k}." for k in range(300)]
    lines += [_kern(T0 + timedelta(milliseconds=30 * k), k, XID95) for k in range(6000)]
    data = ("\n".join(lines) + "\n").encode()
    for block in (65536, 131072, 262144):
        fast = _Counting(_spec(block=block))
        on = fast.scan_bytes(data)
        off = FileScanner(_spec(block=block, storm_blocks=False)).scan_bytes(data)
        _same(on, off)
        assert fast.recut == 1, block
        assert fast.block_counted > 6000 - FOLD_AFTER - 50  # nearly every repeat per block

"""Newline counting with numpy for long spans (core/formats/newlines.py, issue 16): the
counter must give `bytes.count`'s answer for every span, and a scan with it on must give the
same FileScan as with it off. The scans are sized so that the numpy path really runs (spans
of at least NUMPY_MIN_SPAN between sparse hits; a counting wrapper proves it)."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster.connectors.files import reader as reader_mod
from attribution_dagster.core.formats import newlines
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)


def _spans(n: int, rnd: random.Random) -> list[tuple[int, int]]:
    out = [(0, n), (0, 0), (n, n), (0, newlines.NUMPY_MIN_SPAN), (1, newlines.NUMPY_MIN_SPAN + 1)]
    for _ in range(200):
        lo = rnd.randrange(0, n)
        out.append((lo, min(n, lo + rnd.choice([1, 100, 70_000, 300_000, n]))))
    return out


def test_counter_equals_bytes_count_on_every_span() -> None:
    rnd = random.Random(16)
    buf = bytearray(rnd.choice(b"ab\n\r\x00\xff ") for _ in range(1_200_000))
    fast, plain = newlines.counter(buf, fast=True), newlines.counter(buf, fast=False)
    for lo, hi in _spans(len(buf), rnd):
        assert fast(lo, hi) == plain(lo, hi) == buf.count(b"\n", lo, hi), (lo, hi)


def test_counter_follows_the_reused_buffer() -> None:
    """The scanner refills one buffer in place: counts must see the new bytes."""
    buf = bytearray(b"x" * 200_000)
    count = newlines.counter(buf, fast=True)
    assert count(0, len(buf)) == 0
    buf[0:200_000] = b"\n" * 200_000
    assert count(0, len(buf)) == 200_000
    assert count(10, 100_010) == 100_000


def _log(path: Path, rnd: random.Random) -> None:
    """A log with long stretches of chatter between rare anchor lines, some untimed, and a
    stretch of damage (a NUL line, invalid UTF-8)."""
    lines = []
    t = T0 - timedelta(minutes=30)
    for i in range(60_000):
        t += timedelta(milliseconds=50)
        stamp = t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        r = rnd.random()
        if r < 0.0015:
            lines.append(f"{stamp} node-a kernel: NVRM: Xid (PCI:0000:1b:00): 79, pid={i}")
        elif r < 0.002:
            lines.append(f"node-a:1:{i} [0] NCCL WARN Call to ibv_poll_cq failed {i}")
        elif r < 0.0021:
            lines.append("garbage \x00 line")
        elif r < 0.0022:
            lines.append("bad utf8 \udcff\udcfe")  # bytes ff fe (surrogateescape)
        else:
            lines.append(f"{stamp} INFO step={i} loss=2.{i % 997:03d} chatter chatter chatter")
    data = "\n".join(lines).encode("utf-8", "surrogateescape") + b"\n"
    path.write_bytes(data)


def _spec(fast: bool, block: int) -> ScanSpec:
    lits = ("NVRM: Xid", "NCCL WARN")
    return ScanSpec(
        literals=lits,
        context_after=(0, 0),
        window_start=T0 - timedelta(minutes=20),
        window_end=T0 + timedelta(hours=1),
        reference=T0,
        block_size=block,
        fold_repeats=True,
        fast_count=fast,
    )


@pytest.mark.parametrize("block", [256 * 1024, 4 * 1024 * 1024])
def test_scan_with_numpy_counts_equals_scan_without(
    tmp_path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "app.log"
    _log(path, random.Random(block))
    long_spans = []
    real = newlines.counter

    def recording(buf: bytearray, fast: bool = False):  # type: ignore[no-untyped-def]
        inner = real(buf, fast)

        def count(lo: int, hi: int) -> int:
            if fast and hi - lo >= newlines.NUMPY_MIN_SPAN:
                long_spans.append(hi - lo)
            return inner(lo, hi)

        return count

    monkeypatch.setattr("attribution_dagster.core.formats.scan.counter", recording)
    on = FileScanner(_spec(True, block)).scan_path(path, "app.log")
    assert long_spans, "the numpy path never ran: the test would prove nothing"
    off = FileScanner(_spec(False, block)).scan_path(path, "app.log")
    assert on.records and on.lines == 60_000
    assert on.invalid_utf8_lines and on.binary_lines  # the damage counts ran too
    assert dataclasses.asdict(on) == dataclasses.asdict(off)


def test_reader_asks_for_numpy_only_for_big_scans(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The reader turns fast counting on when the files total FAST_COUNT_MIN_BYTES."""
    path = tmp_path / "app.log"
    path.write_bytes(b"2026-11-02T10:00:00Z NVRM: Xid 79\n" * 10)
    seen: list[bool] = []
    real = reader_mod.FileScanner

    class Spy(real):  # type: ignore[misc,valid-type]
        def __init__(self, spec: ScanSpec) -> None:
            seen.append(spec.fast_count)
            super().__init__(spec)

    monkeypatch.setattr(reader_mod, "FileScanner", Spy)
    job = reader_mod.FileJob(path=path, display="logs/a/app.log", node="a")
    r = reader_mod.Reader(workers=1)
    r._scan_all(_spec(False, 1 << 20), [job])
    monkeypatch.setattr(reader_mod, "FAST_COUNT_MIN_BYTES", 100)
    r._scan_all(_spec(False, 1 << 20), [job])
    assert seen == [False, True]

"""The scanner's cheaper block steps give what the per-line steps gave: continuation lines
cut and decoded as one slice, the UTF-8 check of a small block in the big reused buffer,
progress literals pre-checked by shared cores."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

from attribution_dagster.core.formats.matchers import cover
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)


def _spec(**kw: object) -> ScanSpec:
    base = ScanSpec(
        literals=("ChildFailedError", "NVRM: Xid"),
        context_after=(6, 0),
        window_start=T0 - timedelta(hours=1),
        window_end=T0 + timedelta(hours=1),
        reference=T0,
        block_size=4096,
        max_line_bytes=200,
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_continuation_lines_equal_line_by_line_cleaning() -> None:
    """Clean continuations come from one decoded slice; a slice holding a carriage return,
    a control character, invalid UTF-8, a NUL or an overlong line falls back to _clean per
    line: each record's text is what _clean gives line by line."""
    tails = [
        [
            b"====",
            b"train.py FAILED",
            b"  rank : 7 (local_rank: 3)",
            b"\xc3\xa9t\xc3\xa9",
            b"",
            b"x",
        ],
        [b"====", b"with \r", b"ok"],
        [b"bell \x07\x07\x07\x07\x07", b"after"],
        [b"bad \xff\xfe utf-8", b"fine"],
        [b"nul \x00 here", b"next"],
        [b"y" * 300, b"short"],
        [b"\tindented\x1b[0m colour", b"last"],
    ]
    lines: list[bytes] = []
    for tail in tails:
        lines.append(b"2026-11-02 10:00:00,000 ERROR ChildFailedError:")
        lines.extend(tail)
        lines.extend([b"2026-11-02 10:00:01,000 INFO quiet"] * 6)
    scanner = FileScanner(_spec())
    res = scanner.scan_bytes(b"\n".join(lines) + b"\n")
    assert len(res.records) == len(tails)
    for rec, tail in zip(res.records, tails, strict=True):
        want = [*tail, *[b"2026-11-02 10:00:01,000 INFO quiet"] * 6][:6]
        cleaned = [scanner._clean(raw, res) for raw in want]
        expect = "\n".join([rec[3].split("\n")[0], *[t if t is not None else "" for t in cleaned]])
        assert rec[3] == expect
    assert "\n\u00e9t\u00e9\n" in res.records[0][3]  # valid UTF-8 decoded whole
    assert "\ufffd" in res.records[3][3]  # invalid bytes replaced, as _clean does
    assert res.records[4][3].split("\n")[1] == ""  # a NUL line: garbage, kept as ""


def test_continuations_reaching_past_the_block_end() -> None:
    body = [b"line %d of the report" % k for k in range(6)]
    pad = [b"2026-11-02 10:00:01,000 INFO padding %04d" % k for k in range(95)]
    data = b"\n".join([*pad, b"2026-11-02 10:00:02,000 ChildFailedError:", *body]) + b"\n"
    res = FileScanner(_spec()).scan_bytes(data)
    assert res.records[0][3].split("\n")[1:] == [b.decode() for b in body]


def test_small_file_utf8_check_after_a_big_one_in_the_reused_buffer() -> None:
    """The buffer keeps a big file's bytes past a small file's end: a non-ASCII stale tail
    must not make an ASCII file count invalid lines, nor hide a small file's own."""
    scanner = FileScanner(_spec(block_size=65536))
    big = ("2026-11-02 10:00:00,000 INFO caf\u00e9 " * 3 + "\n").encode() * 3000
    assert scanner.scan_bytes(big).invalid_utf8_lines == 0
    assert scanner.scan_bytes(b"2026-11-02 10:00:00,000 INFO ascii\n" * 10).invalid_utf8_lines == 0
    bad = b"2026-11-02 10:00:00,000 INFO ok\n" * 5 + b"bad \xff\n" + b"fine\n"
    assert scanner.scan_bytes(bad).invalid_utf8_lines == 1
    assert scanner.scan_bytes(big + bad).invalid_utf8_lines == 1


def test_progress_cores_cover_every_literal() -> None:
    lits = [b"elapsed time per iteration", b"'loss': ", b"it/s]", b"s/it]", b"it/s,", b"s/it,"]
    lits += [b"loss=", b"loss: ", b"train_loss", b"| loss ", b"ab"]
    cores = cover(lits)
    assert all(any(c in lit for c in cores) for lit in lits)
    assert len(cores) < len(lits) - 4 and b"ab" in cores


def _mixed_log(rng, lines: int) -> bytes:
    """Timed and untimed lines in random runs: NCCL INFO init (untimed), ISO and syslog
    stamps, hits among them, long stretches with no timed line at all."""
    t = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
    out = []
    for i in range(lines):
        t += timedelta(seconds=rng.randint(0, 3))
        kind = rng.random()
        if kind < 0.45:
            out.append(f"node-a:4000:4100 [{i % 8}] NCCL INFO comm 0x{i:x} rank {i % 8} nRanks 8")
        elif kind < 0.6:
            out.append(f"node-a:4000:4100 [{i % 8}] NCCL INFO Channel 00/0 : 0[0] -> 1[1]")
        elif kind < 0.75:
            out.append(f"{t:%Y-%m-%dT%H:%M:%S}.000Z INFO step {i}")
        elif kind < 0.85:
            out.append(f"{t:%b %d %H:%M:%S} node-a kernel: NVRM: Xid (PCI:0000:3b:00): 79, fell")
        else:
            out.append(f"{t:%Y-%m-%d %H:%M:%S},000 ERROR NCCL WARN timeout {i}")
    return ("\n".join(out) + "\n").encode()


def test_skipping_known_gaps_gives_the_same_scan() -> None:
    """An untimed hit's backward search is skipped where a forward search already found no
    timed line: the same records, times, `latest` and tail as searching every time."""
    import random

    rng = random.Random(5)
    spec = _spec(
        literals=("NCCL INFO comm", "NVRM: Xid", "NCCL WARN"),
        context_after=(0, 0, 0),
        block_size=4096,
    )
    for _ in range(30):
        data = _mixed_log(rng, rng.randint(50, 600))
        fast, slow = FileScanner(spec), FileScanner(spec)
        slow.skip_known_gaps = False
        a, b = fast.scan_bytes(data), slow.scan_bytes(data)
        assert a.records and a.records == b.records
        assert (a.latest, a.tail, a.lines) == (b.latest, b.tail, b.lines)


def test_untimed_hits_over_blocks_without_a_timed_line_get_the_next_timed_line() -> None:
    """Long stretches of untimed NCCL lines cross several blocks with no timed line: a
    block's untimed hits reuse the forward search made for the records still open from the
    blocks before. Every untimed record's `latest` is the time of the next timed line of the
    file (a brute-force reading, line by line), and skipping known gaps changes nothing."""
    import random

    from attribution_dagster.core.formats.timestamps import TimestampParser

    rng = random.Random(11)
    spec = _spec(
        literals=("NCCL INFO comm", "NVRM: Xid", "NCCL WARN"),
        context_after=(0, 0, 0),
    )
    parser = TimestampParser(T0)
    for trial in range(12):
        out, t = [], T0 - timedelta(minutes=30)
        for i in range(rng.randint(300, 1500)):
            t += timedelta(seconds=1)
            if rng.random() < (0.002 if trial % 2 else 0.02):  # rare timed lines
                out.append(f"{t:%Y-%m-%dT%H:%M:%S}.000Z ERROR NCCL WARN timeout {i}")
            elif rng.random() < 0.4:
                out.append(f"node-a:4000:4100 [{i % 8}] NCCL INFO comm 0x{i:x} rank {i % 8}")
            else:
                out.append(f"node-a:4000:4100 [{i % 8}] NCCL INFO Channel 00/0 : 0[0] -> 1[1]")
        data = ("\n".join(out) + "\n").encode()
        times = [parser.parse_line(line.encode()) for line in out]
        for block in (4096, 16384):
            fast = FileScanner(dataclasses.replace(spec, block_size=block))
            slow = FileScanner(dataclasses.replace(spec, block_size=block))
            slow.skip_known_gaps = False
            a, b = fast.scan_bytes(data), slow.scan_bytes(data)
            assert a.records and a.records == b.records
            assert (a.latest, a.tail) == (b.latest, b.tail)
            for lineno, _t, quality, _text in a.records:
                later = [x for x in times[lineno:] if x is not None]
                if quality != "exact":
                    assert a.latest.get(lineno) == (later[0] if later else None), lineno

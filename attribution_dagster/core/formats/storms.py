"""Storm lines of one block found at C speed (the scanner's per-block storm path).

A storm is a hot fold key (FileScanner: a line kept FOLD_AFTER times, then folded): a line
that repeats with only its stamp and dmesg uptime changing. Its later lines all look alike:
the kept line's stamp *shape* (its bytes, any digit for a digit), the key's constant bytes
before the uptime (`pre`), an uptime of the same shape and the key's constant rest up to the
newline. Every such line has the same length, so a storm is found two ways, both exact for
that definition and both in C-level calls per block, not Python per line:

- runs: the lines of a storm mostly come back to back. A candidate run found by `find` of
  the line's constant tail (at a line start) is checked by doubling steps: the block with
  its digits translated to 0 must start with the zeroed template repeated there, and each
  digit of `pre` and the rest (a host name, a PCI address) must be itself in every line,
  checked column by column (a strided slice and `count`). A few C passes over the block,
  plus a few Python steps per run.
- regex: when runs are short (the storm interleaved line by line with others), one compiled
  pattern `subn` over the block (literal prefix `pre`; a lookbehind for the line start and
  stamp shape; ~0.3 µs a line in `re`).

Lines found as runs are skipped: the hit finder reads only the gaps between runs. Lines
found by the regex are replaced, in a copy of the block the hit finder reads, by filler of
the same length (NULs, a per-storm tag byte, the newline; runs of other storms are filled
too, `fill_spans`): offsets and line numbers do not move. The scanner reads times, tails
and text from the real block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

# a dmesg uptime stamp: the part of a line that changes between repeats of one message
UPTIME = re.compile(rb"\[\s{0,12}\d{1,12}\.\d{1,9}\]")
_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_SHORT_RUNS = 64  # runs (and misses) looked at before judging the runs too short
_RUN_MIN = 16  # fewer storm lines than this per run on average: the regex pass instead


def shape(stamp: bytes) -> bytes:
    """A regex for bytes like `stamp` but for their digits (`Nov  2 10:35:00`: any second)."""
    return b"".join(rb"\d" if 48 <= c <= 57 else re.escape(bytes([c])) for c in stamp)


@dataclass
class Storm:
    """How to find one storm's lines in a block (see the module doc)."""

    rx: re.Pattern[bytes]
    fill: bytes  # replaces a regex match: pre .. rest, the stamp is kept
    stamp_len: int
    tag: int
    template: bytes  # one line, digits as 0, newline included
    tail: bytes  # the line's constant end, newline included: where runs are looked for
    digits: list[tuple[int, bytes]]  # (column, digit) of the digits of pre and rest

    @property
    def width(self) -> int:
        return len(self.template)

    @property
    def line_fill(self) -> bytes:
        """One line of filler for a line found in a run (fill_spans)."""
        return b"\x00" * (self.width - 2) + bytes([self.tag]) + b"\n"

    def subn(self, hid: bytes | memoryview) -> tuple[bytes, int, int, int]:
        """The regex pass: (copy of `hid` with this storm's lines filled, their number,
        start of the first, start of the last); `hid` is the block as the hit finder will
        read it (earlier storms filled)."""
        out, n = self.rx.subn(self.fill, hid)
        if not n:
            return out, 0, -1, -1
        first, last = out.find(self.fill), out.rfind(self.fill)
        return out, n, first - self.stamp_len, last - self.stamp_len

    def runs(self, buf: bytearray, limit: int) -> list[tuple[int, int]] | None:
        """(start, lines) of each run of this storm's lines in buf[:limit]; None when the
        runs are too short to be worth it (the regex pass is cheaper then)."""
        w, tail, find = self.width, self.tail, buf.find
        zeroed = buf[:limit].translate(_ZERO)  # the block with every digit 0
        runs: list[tuple[int, int]] = []
        pos, looked, lines = 0, 0, 0
        while True:
            occ = find(tail, pos, limit)
            if occ < 0:
                return runs
            a = occ + len(tail) - w
            if a < 0 or (a > 0 and buf[a - 1] != 10) or not self._alike(zeroed, buf, a, 1):
                pos = occ + 1
                looked += 1
            else:
                v, step = 1, 1
                while step:
                    if a + (v + step) * w <= limit and self._alike(zeroed, buf, a + v * w, step):
                        v += step
                        step *= 2
                    else:
                        step //= 2
                runs.append((a, v))
                lines += v
                looked += 1
                pos = a + v * w
            if looked >= _SHORT_RUNS and lines < _RUN_MIN * looked:
                return None

    def _alike(self, zeroed: bytearray, buf: bytearray, a: int, r: int) -> bool:
        """Are the r lines from `a` (a line start) all lines of this storm? Every byte but
        the digits by the zeroed template; the digits of `pre` and the rest (constant: a
        host name, a PCI address) column by column (a strided slice each)."""
        if not zeroed.startswith(self.template * r, a):
            return False
        end = a + r * self.width
        for col, digit in self.digits:
            if buf[a + col : end : self.width].count(digit) != r:
                return False
        return True


def make_storm(stamp: bytes, pre: bytes, uptime: bytes, rest: bytes, tag: int) -> Storm:
    """The Storm of a kept line `stamp + pre + uptime + rest` (uptime and rest may be empty);
    raises re.error when `re` refuses the pattern."""
    rx = re.compile(
        re.escape(pre)
        + b"(?<=(?<![^\n])"
        + shape(stamp)
        + re.escape(pre)
        + b")"
        + shape(uptime)
        + re.escape(rest)
        + b"(?=\n)"
    )
    width = len(pre) + len(uptime) + len(rest)
    template = (stamp + pre + uptime + rest + b"\n").translate(_ZERO)
    at, up = len(stamp), len(stamp) + len(pre)
    constant = [(at + i, c) for i, c in enumerate(pre)]
    constant += [(up + len(uptime) + i, c) for i, c in enumerate(rest)]
    return Storm(
        rx=rx,
        fill=b"\x00" * (width - 1) + bytes([tag]),
        stamp_len=len(stamp),
        tag=tag,
        template=template,
        tail=(rest if uptime else pre) + b"\n",
        digits=[(col, bytes([c])) for col, c in constant if 48 <= c <= 57],
    )


class _HitFinder(Protocol):
    def hit_lines(self, buf: bytearray, view: memoryview, limit: int) -> list[tuple[int, int]]: ...


def storm_of(
    buf: bytearray, s: int, e: int, m: re.Match[bytes], matcher: _HitFinder, tag: int
) -> Storm | None:
    """The Storm of the hot line buf[s:e] whose LINE_TIME match is `m`, or None when its
    lines cannot be told exactly by shape: a stamp whose digits change how LINE_TIME reads
    it (glog's MMDD), a constant part under 8 bytes before the uptime (the regex's literal
    prefix), no anchor in a constant part (then not every line of the shape is a hit), or a
    pattern `re` refuses. The uptime is found as the fold key finds it (first 160 bytes)."""
    b0 = m.end()
    um = UPTIME.search(buf, b0, min(e, b0 + 160))
    pre = bytes(buf[b0 : um.start()] if um else buf[b0:e])
    uptime = um.group() if um else b""
    rest = bytes(buf[um.end() : e]) if um else b""
    probe = bytearray(pre + b"\n" + rest)
    if (
        m.group("gmd") is not None
        or len(pre) < 8
        or not matcher.hit_lines(probe, memoryview(probe), len(probe))
    ):
        return None
    try:
        return make_storm(bytes(buf[s:b0]), pre, uptime, rest, tag)
    except (re.error, OverflowError, RecursionError):  # a lookbehind `re` refuses
        return None


def fill_spans(hid: bytes, spans: list[tuple[int, int, bytes]], limit: int) -> bytes:
    """`hid` with each (start, end, line) span (sorted, runs of whole lines) filled with
    `line` repeated: the same length, newlines where they were."""
    if not spans:
        return hid
    pieces: list[bytes] = []
    prev = 0
    for a, b, line in spans:
        pieces += [hid[prev:a], line * ((b - a) // len(line))]
        prev = b
    pieces.append(hid[prev:limit])
    return b"".join(pieces)

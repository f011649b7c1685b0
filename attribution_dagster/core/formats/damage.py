"""Damaged lines of a scanned block (core/formats/scan.py): counted for the whole block with
C-level calls, never a per-line loop, and the examined lines decoded.

Overlong lines are found by probing one `rfind` per `max_line_bytes` window; invalid UTF-8 by
`isascii()` and, only for non-ASCII blocks, incremental strict decoding from error to error;
binary lines by looking for NUL bytes. At most DAMAGE_CAP lines per kind and block are
located (counts are "at least" beyond that, so a latin-1 or binary file stays fast). Lines
that are mostly control characters without a NUL are only recognised when examined
(`clean_line`: hit and continuation lines), and decoded with replacement otherwise.
"""

from __future__ import annotations

import codecs
from typing import Any

DAMAGE_CAP = 256  # damaged lines located per kind and block
# Bytes that count as control characters when deciding a line is binary garbage.
CONTROL = bytes(b for b in range(32) if b not in (9, 27)) + b"\x7f"
NOT_CONTROL = bytes(b for b in range(256) if b not in CONTROL)


def count_damage(buf: bytearray, view: memoryview, limit: int, size: int, res: Any) -> None:
    """Count overlong (over `size` bytes), NUL-binary and invalid UTF-8 lines of
    buf[:limit] into `res` (a FileScan)."""
    find, rfind = buf.find, buf.rfind
    p, found = 0, 0
    while p + size < limit and found < DAMAGE_CAP:
        nl = rfind(b"\n", p, p + size + 1)
        if nl >= 0:
            p = nl + 1
            continue
        found += 1  # no newline within max_line_bytes of a line start: overlong
        nl = find(b"\n", p + size, limit)
        p = nl + 1 if nl >= 0 else limit
    res.overlong_lines += found
    pos, found = find(b"\x00", 0, limit), 0
    while pos >= 0 and found < DAMAGE_CAP:
        found += 1
        nl = find(b"\n", pos, limit)
        pos = find(b"\x00", nl, limit) if nl >= 0 else -1
    res.binary_lines += found
    # the common case: pure ASCII cannot be invalid UTF-8. A small block (a small file
    # in the big reused buffer) is copied and checked alone; a big one: the whole buffer
    # first, no copy (it holds stale bytes past `limit`: then the block exactly)
    if limit * 4 < len(buf):
        if bytes(view[:limit]).isascii():
            return
    elif buf.isascii() or bytes(view[:limit]).isascii():
        return
    pos, found = 0, 0
    while found < DAMAGE_CAP:
        try:
            codecs.utf_8_decode(view[pos:limit], "strict", True)
            break
        except UnicodeDecodeError as exc:
            found += 1
            nl = find(b"\n", pos + exc.start, limit)
            if nl < 0:
                break
            pos = nl + 1
    res.invalid_utf8_lines += found


def clean_line(raw: bytes | bytearray, size: int, res: Any) -> str | None:
    """Decode one examined line (cut at `size` bytes); None for binary garbage. Overlong, NUL
    and invalid UTF-8 lines were counted by count_damage; only control-char garbage is
    counted here."""
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    truncated = len(raw) > size
    if truncated:
        raw = raw[:size]
    if b"\x00" in raw:
        return None
    if raw and len(raw.translate(None, NOT_CONTROL)) * 10 > len(raw) * 3:
        res.binary_lines += 1
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if truncated and exc.start >= len(raw) - 3 and exc.reason == "unexpected end of data":
            return raw[: exc.start].decode("utf-8", "replace")
        return raw.decode("utf-8", "replace")

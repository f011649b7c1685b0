"""Counting a block's newlines (line numbers, a file's line count) at memory speed.

Why: after the hit finder, `bytes.count(b"\\n")` is the scanner's costliest pass over the
bytes. CPython's one-byte count is a plain loop (~2.5 GB/s here: it may stop early, so it
is not vectorised); numpy's compare-and-count is SIMD (~8.7 GB/s). numpy costs ~50 ms to
import (and ~10 MB), so a scan asks for it only when its files are big enough to win that
back (`FAST_COUNT_MIN_BYTES`, decided by the reader; imported by the scanner workers, not
the parent), and only spans of at least `NUMPY_MIN_SPAN` bytes go through it: the short
gaps between hit lines stay with `bytes.count`, whose call costs less than numpy's. Both
give the same counts.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

NUMPY_MIN_SPAN = 64 * 1024  # shorter spans: bytes.count (a numpy call costs ~2 µs)
FAST_COUNT_MIN_BYTES = 512 * 1024 * 1024  # a scan this big asks for numpy (import ~50 ms)

Counter = Callable[[int, int], int]
"""count(lo, hi): newlines in buf[lo:hi]."""


def numpy_importable() -> bool:
    """Whether numpy can be imported, without importing it (the reader's parent process
    does not need it: its scanner workers do)."""
    return importlib.util.find_spec("numpy") is not None


def numpy_module() -> Any | None:
    """numpy when importable (a pandas dependency, so normally present), else None."""
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy ships with pandas
        return None
    return numpy


def counter(buf: bytearray, fast: bool = False) -> Counter:
    """A newline counter over `buf` (a reused scan buffer, never resized while counted):
    numpy for long spans when `fast` and numpy is importable, else `bytes.count`."""
    count = buf.count
    np = numpy_module() if fast else None
    if np is None:
        return lambda lo, hi: count(b"\n", lo, hi)
    arr = np.frombuffer(buf, dtype=np.uint8)
    eq = np.empty(len(buf), dtype=bool)  # reused: no 4 MB allocation (page faults) per call
    equal, nonzero = np.equal, np.count_nonzero

    def fast_count(lo: int, hi: int) -> int:
        if hi - lo < NUMPY_MIN_SPAN:
            return count(b"\n", lo, hi)
        out = eq[: hi - lo]
        equal(arr[lo:hi], 10, out=out)
        return int(nonzero(out))

    return fast_count

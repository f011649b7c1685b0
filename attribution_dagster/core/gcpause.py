"""The cyclic garbage collector held off while a hot loop builds many acyclic objects.

The normalizer turns tens of thousands of records into facts and observations (dicts,
slotted objects, pydantic models: no reference cycles). Each 700 allocations start a young
collection, and every few of those an older one that walks everything the run still holds
(the records, the catalog, the engine): 0.15-0.2 s of the parent's 1.1 s normalize on the
8,192-rank watchdog profile, spent re-walking objects that are not garbage. Reference
counting still frees everything as usual; only cycle detection waits until the loop ends.

Process-wide, as `gc.disable` is: nested and concurrent pauses are counted, the collector
comes back when the last one ends, and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with automatic cycle collection off (restored afterwards)."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()

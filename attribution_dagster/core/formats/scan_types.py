"""What the scanner (core/formats/scan.py) is given and gives back, as plain picklable
dataclasses: the spec a worker process scans files of one case by, and one file's result."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

DEFAULT_BLOCK = 4 * 1024 * 1024


@dataclass(frozen=True)
class ScanSpec:
    """Everything a worker process needs to scan files of one case (picklable)."""

    literals: tuple[str, ...]
    context_after: tuple[int, ...]
    window_start: datetime
    window_end: datetime
    reference: datetime  # job start, for syslog year inference
    log_timezone: str = "UTC"
    max_line_bytes: int = 65536
    block_size: int = DEFAULT_BLOCK
    use_hyperscan: bool = True
    # literals of which only each file's last line is kept (training progress): searched
    # backwards in the last PROGRESS_WINDOW bytes of each block, never as hits
    last_literals: tuple[str, ...] = ()
    # a hit line repeated in its file with only its leading timestamps changed (syslog or
    # ISO time, dmesg uptime) is kept once, with its count and last line (FileScan.repeats)
    fold_repeats: bool = False
    # count a storm's later repeats per block with C-level regex passes (module doc); off:
    # every repeat goes through the per-line loop (same results, tests compare the two)
    storm_blocks: bool = True
    # count newlines with numpy's SIMD compare for long spans (core/formats/newlines.py):
    # the reader asks for it when a scan is big enough to win back numpy's import
    fast_count: bool = False

    def __post_init__(self) -> None:
        # compared with every hit's time: ~40 ns within one tzinfo, ~600 ns across two
        for name in ("window_start", "window_end", "reference"):
            t = getattr(self, name)
            if t.tzinfo is not None and t.tzinfo is not timezone.utc:
                object.__setattr__(self, name, t.astimezone(timezone.utc))


@dataclass
class FileScan:
    """Result of scanning one file; records are (line number, time, quality, text)."""

    records: list[tuple[int, datetime | None, str, str]] = field(default_factory=list)
    # line number of an untimed record -> time of the next timed line of the file (its
    # latest possible time); absent when no timed line follows it
    latest: dict[int, datetime] = field(default_factory=dict)
    # the file's last timed line (line number, time, text): where a node that went silent
    # stopped writing; found by the same backward searches, no extra pass over the bytes
    tail: tuple[int, datetime, str] | None = None
    # the file's last line holding a `last_literals` literal (line, time, quality, text); a
    # progress line followed by more than PROGRESS_WINDOW bytes of other output in its block
    # is missed (an earlier one, or none, is reported: the engine then demotes less)
    progress: tuple[int, datetime | None, str, str] | None = None
    # line number of a kept record -> [count, last line number, last time, last text] of the
    # lines that repeat it (ScanSpec.fold_repeats); absent for a line not folded
    repeats: dict[int, list] = field(default_factory=dict)
    lines: int = 0
    bytes: int = 0
    out_of_window: int = 0
    invalid_utf8_lines: int = 0
    overlong_lines: int = 0
    binary_lines: int = 0
    error: str | None = None

"""Folding the kept lines of one file that state the same facts into one record (issue 16).

The rules layer says which lines state the same facts (`core.evidence.LineGrouper`, given to
the reader by the pipeline); this module folds them where the file was scanned, in the
scanner's worker, so a fact repeated 100,000 times crosses the process boundary once and is
parsed once more in the parent. A folded record keeps what `rules.facts.Fact.absorb` would
keep of the facts of its lines: the earliest line (time, number, text; ties: the first in
the file), the count, and the latest line (ties: the last in the file). A line with parts
of several parsers is split per parser (`RawRecord.only`), since each part folds with other
lines; a line the grouper leaves whole (None) is kept as it is.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from datetime import datetime

from attribution_dagster.core.evidence import LinePart
from attribution_dagster.core.formats.scan import FileScan
from attribution_dagster.core.formats.timestamps import earlier

GROUP_MIN_LINES = 256
"""A file is grouped when it keeps more lines than this (NCCL_DEBUG=INFO init, a storm of
distinct lines): there memory follows facts. Below, every line stays itself, so an export
writes each one and a re-analysis counts the same (reports/export.py)."""
GROUP_KEEP = 1
"""Lines kept as themselves per fact in a grouped file before later ones fold in."""

# (line, time, quality, text, only, count, last line, last time, last text)
Row = list


def _absorb(row: Row, line: int, t: datetime | None, text: str, count: int, last: tuple) -> None:
    """Fold one line (with its own folded repeats `count`, `last`) into `row`."""
    mine_last = (row[7], row[6], row[8]) if row[6] is not None else (row[1], row[0], row[3])
    its_last = last if last[1] is not None else (t, line, text)
    if t is not None and (row[1] is None or earlier(t, row[1])):
        row[0], row[1], row[3] = line, t, text
    mt, it = mine_last[0], its_last[0]
    if (it is not None and (mt is None or not earlier(it, mt))) or (it is None and mt is None):
        mine_last = its_last
    row[5] += count
    row[7], row[6], row[8] = mine_last


def grouped_rows(
    res: FileScan, parts: Sequence[list[LinePart] | None], keep: int = GROUP_KEEP
) -> list[tuple]:
    """The scan's records as rows, lines stating the same facts folded (see module doc)."""
    rows: list[Row] = []
    held: dict[Hashable, list] = {}  # key -> [row, lines kept as themselves]
    for (line, t, quality, text), line_parts in zip(res.records, parts, strict=True):
        rep = res.repeats.get(line)
        count = rep[0] if rep else 1
        last = (rep[2], rep[1], rep[3]) if rep else (None, None, None)
        if line_parts is None:
            rows.append([line, t, quality, text, None, count, last[1], last[0], last[2]])
            continue
        for only, key in line_parts:
            have = held.get(key)
            if have is not None and have[1] >= keep:
                _absorb(have[0], line, t, text, count, last)
                continue
            row = [line, t, quality, text, only, count, last[1], last[0], last[2]]
            rows.append(row)
            if have is None:
                held[key] = [row, 1]
            else:
                have[0], have[1] = row, have[1] + 1
    return [tuple(r) for r in rows]


def plain_rows(res: FileScan) -> list[tuple]:
    """The scan's records as rows, nothing folded but the scanner's own repeats."""
    out = []
    for line, t, quality, text in res.records:
        rep = res.repeats.get(line)
        if rep:
            out.append((line, t, quality, text, None, rep[0], rep[1], rep[2], rep[3]))
        else:
            out.append((line, t, quality, text, None, 1, None, None, None))
    return out

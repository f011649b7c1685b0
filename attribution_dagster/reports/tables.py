"""The one Markdown table writer: the weekly report, a job's summary and the Dagster
metadata tables all render through `markdown_table`.

A cell is one line of text: NUL, CR and LF cannot break a row, `|` is escaped, a backtick
becomes `'` (a stray one would open a code span across cells), and a cell may be cut to
`limit` characters. A `Code` cell is shown as code (a locator a person pastes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Code:
    """A cell shown as inline code."""

    text: str


def markdown_cell(value: Any, limit: int | None = None) -> str:
    if isinstance(value, Code):
        return f"`{_one_line(value.text).replace('`', chr(39))}`"
    text = _one_line("" if value is None else str(value)).replace("`", "'")
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def _one_line(text: str) -> str:
    text = text.replace("\x00", "\ufffd").replace("\r", " ").replace("\n", " ")
    return text.replace("|", "\\|")


def markdown_table(
    header: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    limit: int | None = None,
    more: int = 0,
) -> str:
    """A GitHub-flavoured Markdown table; `more` > 0 adds a line saying how many rows were
    left out."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(markdown_cell(c, limit) for c in row) + " |" for row in rows]
    if more:
        lines.append(f"\n… and {more} more")
    return "\n".join(lines)

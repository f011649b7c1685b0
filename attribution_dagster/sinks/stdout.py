"""Print results as JSON lines (the result contract, one object per line)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from attribution_dagster.core.result import AttributionResult


class StdoutSink:
    """Writes each result as one JSON object per line; handy for piping into other tools."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def write(self, results: Iterable[AttributionResult]) -> int:
        stream = self._stream or sys.stdout
        n = 0
        for result in results:
            stream.write(result.contract_json() + "\n")
            n += 1
        stream.flush()
        return n

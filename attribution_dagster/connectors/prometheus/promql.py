"""PromQL text for the Prometheus connector: string literals, regex escaping, durations,
steps, and the screening, presence and raw-sample selectors. No HTTP here."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from attribution_dagster.core.evidence import MetricFamily
from attribution_dagster.core.hosts import re2_escape

MIN_STEP_SECONDS = 15.0
MAX_POINTS_PER_SERIES = 500


def promql_string(value: str) -> str:
    """A PromQL double-quoted string literal of `value`."""
    out = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{out}"'


def exact_regex(values: Iterable[str]) -> str:
    return "|".join(re2_escape(v) for v in sorted(set(values)))


def step_seconds(window_seconds: float, override: float | None = None) -> float:
    """Step of a long-window subquery: `override`, else max(15 s, window / 500), whole seconds."""
    if override:
        return float(override)
    return float(max(MIN_STEP_SECONDS, math.ceil(window_seconds / MAX_POINTS_PER_SERIES)))


def duration(seconds: float) -> str:
    """A PromQL duration in whole milliseconds (`3601000ms`)."""
    return f"{max(1, round(seconds * 1000))}ms"


def format_ts(t: float) -> str:
    return f"{t:.3f}".rstrip("0").rstrip(".")


def series_selector(name: str, labels: dict[str, str]) -> str:
    """`name{k="v",...}` selecting exactly one series (labels sorted)."""
    inner = ",".join(f"{k}={promql_string(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


class Selectors:
    """Selectors for one job: the node regex under each node label, plus the extra matchers."""

    def __init__(self, regex: str, keys: Sequence[str], extra: str, window_seconds: float):
        self.regex = regex
        self.keys = tuple(keys)
        self.extra = extra
        self.range = duration(window_seconds)

    def sel(self, name: str, key: str) -> str:
        matchers = [f"{key}=~{promql_string(self.regex)}"]
        if self.extra:
            matchers.append(self.extra)
        return f"{name}{{{','.join(matchers)}}}"

    def _cond(self, fam: MetricFamily, name: str, key: str) -> str:
        r = f"{self.sel(name, key)}[{self.range}]"
        changed = f"changes({r}) > 0"
        if fam.mode == "increase":
            return changed
        if fam.mode == "state" and fam.normal is not None:
            off = f"max_over_time({r}) != {fam.normal:g}"
            if fam.steady_after:
                # constant and abnormal in >= steady_after samples: the parser ignores it
                off = f"({off} and count_over_time({r}) < {fam.steady_after})"
            return f"{changed} or {off}"
        return f"{changed} or max_over_time({r}) != 0"

    def screen(self, fam: MetricFamily) -> str:
        parts = []
        for name in fam.names:
            cond = " or ".join(f"({self._cond(fam, name, k)})" for k in self.keys)
            parts.append(f'label_replace({cond}, "__name__", {promql_string(name)}, "", "")')
        return " or ".join(parts)

    def presence(self, names: Sequence[str]) -> str:
        inner = " or ".join(
            f"last_over_time({self.sel(n, k)}[{self.range}])" for n in names for k in self.keys
        )
        return f"count by ({', '.join(self.keys)}) ({inner})"


def fetch_selector(names: Iterable[str], key: str, hosts: Iterable[str], extra: str,
                   hits: Sequence[dict[str, str]], max_values: int = 64) -> str:
    """A selector for the raw samples of screened series: their names, their node label's
    exact values, and each other label all hits share with at most `max_values` values.
    It may select more (quiet) series than the hits, never fewer."""
    matchers = [f"__name__=~{promql_string(exact_regex(names))}",
                f"{key}=~{promql_string(exact_regex(hosts))}"]
    if extra:
        matchers.append(extra)
    common = set.intersection(*(set(h) for h in hits)) if hits else set()
    pinned = set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", extra))
    for label in sorted(common - {"__name__", key} - pinned):
        values = {h[label] for h in hits}
        if len(values) <= max_values:
            matchers.append(f"{label}=~{promql_string(exact_regex(values))}")
    return "{" + ",".join(matchers) + "}"

"""Metric samples -> observations: change detection per series, driven by parsers.yaml `metrics:`.

Counters and gauges say nothing line by line; what matters is when they change. Each series
(name + labels) is sorted by time and walked once. Modes:

- `last_value`: a gauge holding the last event code (DCGM_FI_DEV_XID_ERRORS); emit when the
  value changes to a nonzero value (a nonzero first sample counts).
- `increase`: a counter; emit when it rises (attrs.delta). The first sample only sets a base.
- `positive`: emit on the first sample > 0 and on every rise after it.
- `below`: a gauge read as a share of another series of the same node (`ratio_of`, e.g.
  MemAvailable / MemTotal); emit when the share falls below `below` from at or above it (a
  series low from its first sample never changed while watched: not an event).
- `state`: emit `kind` when the value leaves `normal`, `recover_kind` when it returns. A series
  that starts abnormal is reported (the port was down when watching began), unless it stays
  abnormal in every one of `steady_abnormal_after` or more samples: a port that is down the
  whole time (unused, disabled) never changed while the job ran.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample
from attribution_dagster.core.formats.promtext import sample_nodes
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.observation import Observation


class MetricExample(BaseModel):
    """One series (metric = the spec's first name, one sample per second) and what it yields."""

    model_config = ConfigDict(extra="forbid")

    labels: dict[str, str] = Field(default_factory=dict)
    values: list[float] = Field(min_length=1)
    ratio_values: list[float] | None = None  # mode below: the `ratio_of` series, same times
    expect: list[dict[str, Any]]


class MetricSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str
    names: list[str] = Field(min_length=1)
    mode: Literal["last_value", "increase", "positive", "state", "below"]
    normal: float | None = None  # for mode state
    ratio_of: str | None = None  # mode below: the denominator metric (same node)
    below: float | None = Field(default=None, gt=0, lt=1)  # mode below: the share threshold
    # mode state: a series abnormal in every one of at least this many samples never changed
    # state while it was watched (an unused or disabled port): no observation
    steady_abnormal_after: int | None = Field(default=None, ge=2)
    recover_kind: str | None = None
    code_from_value: bool = False
    port_from_labels: bool = False  # port = `device/port` labels (node_exporter IB series)
    attrs: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    examples: list[MetricExample] = Field(min_length=1)


def _node(sample: MetricSample, ctx: ExecutionContext | None) -> str:
    """The job node a sample's labels name (the first of Hostname / instance / node ... that
    nodes.NodeIndex resolves: any spelling, port, IP or alias); else the connector's node."""
    names = sample_nodes(sample.labels)
    if ctx is None:
        return names[0] if names else sample.node
    index = NodeIndex.cached(ctx)
    for host in names:
        node = index.resolve(host)
        if node is not None:
            return node
    return sample.node or (names[0] if names else "")


def normalize_pci(raw: str | None, short: bool = True) -> str | None:
    """`00000000:91:00.0` or `0000:91:00` -> `0000:91:00` (short) / `0000:91:00.0` (full)."""
    if not raw:
        return None
    s = raw.strip().lower()
    if s.startswith("pci:"):
        s = s[4:]
    parts = s.split(":")
    if len(parts) == 2:
        parts = ["0000", *parts]
    if len(parts) != 3:
        return s or None
    dom, bus, devfn = parts
    dom = dom[-4:].rjust(4, "0")
    dev, _, fn = devfn.partition(".")
    if short or not fn:
        return f"{dom}:{bus}:{dev}"
    return f"{dom}:{bus}:{dev}.{fn}"


def _int_label(labels: dict[str, str], key: str) -> int | None:
    try:
        return int(labels[key])
    except (KeyError, ValueError):
        return None


def _fmt(sample: MetricSample) -> str:
    labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
    text = f"{sample.name}{{{labels}}} {sample.value:g} @ {sample.time.isoformat()}"
    return text[:300]


def _sort_key(t: datetime) -> float:
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


class MetricNormalizer:
    """Holds the metric specs, indexed by metric name."""

    def __init__(self, specs: list[MetricSpec]):
        self.specs = specs
        self._by_name: dict[str, MetricSpec] = {}
        for spec in specs:
            for name in spec.names:
                self._by_name[name] = spec

    def normalize(
        self, samples: list[MetricSample], ctx: ExecutionContext | None = None
    ) -> list[Observation]:
        series: dict[tuple[str, tuple[tuple[str, str], ...]], list[MetricSample]] = defaultdict(
            list
        )
        denominators = {spec.ratio_of for spec in self.specs if spec.ratio_of}
        totals: dict[tuple[str, str], list[MetricSample]] = defaultdict(list)
        for s in samples:
            if math.isnan(s.value):
                continue
            if s.name in self._by_name:
                series[(s.name, tuple(sorted(s.labels.items())))].append(s)
            if s.name in denominators:
                totals[(s.name, _node(s, ctx))].append(s)
        for items in totals.values():
            items.sort(key=lambda s: _sort_key(s.time))
        out: list[Observation] = []
        for (name, _), items in series.items():
            spec = self._by_name[name]
            items.sort(key=lambda s: _sort_key(s.time))
            if spec.mode == "below":
                total = totals.get((spec.ratio_of or "", _node(items[0], ctx)), [])
                out.extend(self._below(spec, items, total, ctx))
            else:
                out.extend(self._walk(spec, items, ctx))
        return out

    def _below(
        self,
        spec: MetricSpec,
        items: list[MetricSample],
        total: list[MetricSample],
        ctx: ExecutionContext | None,
    ) -> list[Observation]:
        """Mode below: the value as a share of the node's `ratio_of` series (its latest sample
        at or before, else its first); an observation on each fall below `spec.below`."""
        out: list[Observation] = []
        if not total or spec.below is None:
            return out
        j, prev_low = 0, None
        for s in items:
            while j + 1 < len(total) and _sort_key(total[j + 1].time) <= _sort_key(s.time):
                j += 1
            denom = total[j].value
            if not denom or denom <= 0:
                continue
            share = s.value / denom
            low = share < spec.below
            if low and prev_low is False:
                attrs = {"percent": round(100 * share, 3), "total": denom}
                out.append(self._obs(spec, spec.kind, s, attrs, ctx))
            prev_low = low
        return out

    def _walk(
        self, spec: MetricSpec, items: list[MetricSample], ctx: ExecutionContext | None
    ) -> list[Observation]:
        out: list[Observation] = []
        if (
            spec.mode == "state"
            and spec.steady_abnormal_after is not None
            and len(items) >= spec.steady_abnormal_after
            and all(s.value != spec.normal for s in items)
        ):
            return out
        prev: float | None = None
        for s in items:
            v = s.value
            emit: str | None = None
            attrs: dict[str, Any] = {}
            if spec.mode == "last_value":
                if v != 0 and v != prev:
                    emit = spec.kind
            elif spec.mode == "increase":
                if prev is not None and v > prev:
                    emit, attrs["delta"] = spec.kind, v - prev
            elif spec.mode == "positive":
                if v > 0 and (prev is None or v > prev):
                    emit = spec.kind
                    attrs["delta"] = v - (prev or 0.0)
            elif spec.mode == "state" and spec.normal is not None:
                if v != spec.normal and (prev is None or prev == spec.normal):
                    # a series that starts abnormal is reported too: the port was down
                    emit = spec.kind
                elif v == spec.normal and prev is not None and prev != spec.normal:
                    emit = spec.recover_kind
                attrs["state"] = v
                if prev is not None:
                    attrs["previous_state"] = prev
            prev = v
            if emit:
                out.append(self._obs(spec, emit, s, attrs, ctx))
        return out

    def _obs(
        self,
        spec: MetricSpec,
        kind: str,
        s: MetricSample,
        attrs: dict[str, Any],
        ctx: ExecutionContext | None,
    ) -> Observation:
        labels = s.labels
        port = None
        if spec.port_from_labels and "device" in labels:
            port = labels["device"] + (f"/{labels['port']}" if labels.get("port") else "")
        all_attrs: dict[str, Any] = {"origin": "metric", "metric": s.name, "value": s.value}
        all_attrs.update(spec.attrs)
        all_attrs.update(attrs)
        if "delta" in all_attrs and float(all_attrs["delta"]).is_integer():
            all_attrs["delta"] = int(all_attrs["delta"])
        if "link" in labels:
            all_attrs["link"] = labels["link"]
        code = None
        if spec.code_from_value and math.isfinite(s.value):
            code = int(s.value)
        return Observation(
            kind=kind,
            node=_node(s, ctx),
            time=s.time,
            time_quality="exact",
            gpu=_int_label(labels, "gpu"),
            pci=normalize_pci(labels.get("pci_bus_id")),
            port=port,
            code=code,
            attrs=all_attrs,
            excerpt=_fmt(s),
            source=s.source,
            locator=s.locator,
            parser=spec.id,
        )

"""Normalized, typed events: what the parsers produce and the rules read."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from attribution_dagster.core.evidence import TimeQuality
from attribution_dagster.core.locators import Locator, _as_locator

AttrValue = str | int | float | bool | None
Kind = str
"""An observation kind: a name from rules/kinds.yaml (the rules layer owns the vocabulary)."""


class Observation(BaseModel):
    """A normalized, typed event. `kind` names one of the kinds in rules/kinds.yaml (the
    rules layer owns that vocabulary and validates the catalogs against it)."""

    model_config = ConfigDict(frozen=True)

    kind: Kind
    node: str
    time: datetime | None
    time_quality: TimeQuality = "exact"
    time_latest: datetime | None = None  # untimed lines: latest possible time (None: job end)
    gpu: int | None = None  # GPU index where the line says it (cudaDev, label gpu=)
    pci: str | None = None  # PCI bus id, "0000:91:00"
    port: str | None = None  # NIC / IB port: "mlx5_0/1", "enp1s0f0np0", "Link 01"
    peer: str | None = None  # remote address (NCCL peer)
    code: int | None = None  # XID / SXid / exit code / errno
    attrs: dict[str, AttrValue] = Field(default_factory=dict)
    excerpt: str  # the raw line, trimmed
    source: str
    locator: Locator
    parser: str  # id of the parser that produced it
    # A repeated fact is one fact (issue 16): observations identical in kind, node, GPU,
    # port, fields and attrs are folded into one; `time` / `locator` are the first
    # occurrence's, `time_last` / `locator_last` the last one's (None when count is 1).
    count: int = Field(default=1, ge=1)
    time_last: datetime | None = None
    locator_last: Locator | None = None

    @model_validator(mode="before")
    @classmethod
    def _text_locator(cls, data: Any) -> Any:
        return _as_locator(data)


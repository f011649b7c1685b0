"""The result contract of spec section 2, plus its optional detail fields."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from attribution_dagster.core.evidence import SourceCoverage, TimeQuality
from attribution_dagster.core.locators import Locator

RESULT_SCHEMA_VERSION = "1"

CONTRACT_FIELDS = frozenset(
    {
        "job_id",
        "failed",
        "status",
        "category",
        "candidates",
        "suspect_nodes",
        "symptom_chain",
        "evidence",
        "rules_version",
    }
)
"""Top-level fields every result must carry (spec section 2); more fields are welcome."""


Role = Literal["root_cause", "symptom"]
Status = Literal["attributed", "ambiguous", "unattributed", "not_failed"]

CATEGORIES: dict[str, str] = {
    "gpu.nvlink": "NVLink / NVSwitch fault",
    "gpu.memory": "uncorrectable GPU memory error",
    "gpu.lost": "GPU fell off the bus or became inaccessible",
    "gpu.driver": "GPU firmware / driver fault",
    "network.fabric": "InfiniBand / RoCE / Ethernet fabric fault",
    "node.down": "node became unreachable, crashed or was marked failed",
    "node.host_oom": "host kernel OOM killer ended the workload",
    "storage": "filesystem or disk fault",
    "app.gpu_oom": "the application ran out of GPU memory",
    "app.error": "the application failed on its own",
    "scheduler.time_limit": "the job hit its time limit",
    "scheduler.cancelled": "the job was cancelled or preempted",
}


class Evidence(BaseModel):
    """A pointer back to the raw line or query: `locator` reopens it (the contract string,
    spec section 2); `ref` is the same place typed (file and line, query and time, object)."""

    source: str
    locator: str
    ref: Locator | None = None
    time: datetime | None
    node: str
    excerpt: str
    time_latest: datetime | None = None  # an untimed line: logged between `time` and this
    # a repeated fact (issue 16): how many lines, and the last one's time and locator
    count: int = 1
    time_last: datetime | None = None
    locator_last: str | None = None


class ChainLink(BaseModel):
    time: datetime | None
    node: str
    kind: str
    role: Role
    summary: str
    evidence: Evidence
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None
    count: int = 1  # identical observations folded into this link
    time_quality: TimeQuality = "exact"  # "inherited": the line had no time; it was logged after
    # an untimed line is an interval: `time` is its earliest possible time, this the latest
    time_latest: datetime | None = None


class Candidate(BaseModel):
    category: str
    nodes: list[str]
    score: float
    rule: str | None = None
    summary: str | None = None


class Suspect(BaseModel):
    node: str
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None


class AttributionResult(BaseModel):
    """The result contract of spec section 2, plus optional detail fields."""

    job_id: str
    failed: bool
    status: Status
    category: str | None
    candidates: list[Candidate] = Field(default_factory=list)
    suspect_nodes: list[str] = Field(default_factory=list)
    symptom_chain: list[ChainLink] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    rules_version: str
    # optional detail
    cluster: str | None = None
    state: str | None = None
    confidence: float | None = None
    rule: str | None = None
    summary: str | None = None
    scope: Literal["node", "shared"] | None = None  # shared: switch / storage, not a node fault
    suspects: list[Suspect] = Field(default_factory=list)
    remediation: str | None = None
    notes: list[str] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)
    analyzed_at: datetime | None = None

    def contract_json(self, **kwargs: Any) -> str:
        return self.model_dump_json(**kwargs)

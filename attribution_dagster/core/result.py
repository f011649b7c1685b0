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

Category = str
"""A failure category: a name from rules/categories.yaml (the spec taxonomy). The rules layer
owns the words and validates the rule catalog against them; core holds only the type."""


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
    category: Category
    nodes: list[str]
    score: float
    rule: str | None = None
    summary: str | None = None


class Suspect(BaseModel):
    node: str
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None


class Lead(BaseModel):
    """Where to look first when no cause is proven (spec section 2, `leads`): the rank that
    did not arrive at the collective the others wait in, and the evidence that says so."""

    node: str
    gpu: int | None = None
    rank: int | None = None
    process_group: str | None = None
    seq: int | None = None
    why: str
    evidence: list[str] = Field(default_factory=list)  # locators (`path:line`, dump entries)


class FaultPort(BaseModel):
    """One cable involved in a fault: the job node's port and the switch port at its far end,
    as far as the topology tells (spec section 2, `fault_domain.ports`)."""

    node: str
    host_port: str | None = None
    switch: str | None = None
    switch_port: str | None = None


class FaultDomain(BaseModel):
    """Where a network or NVLink cause sits in the cluster's topology (spec section 2).

    `link`: one cable; `leaf`: several nodes of one leaf or block hit together; `spine`:
    nodes under different leaves of one spine; `nvlink_domain`: an NVLink partition or rack.
    Absent when no topology is known or the cause is not a network one.
    """

    level: Literal["link", "leaf", "spine", "nvlink_domain"]
    name: str
    nodes: list[str] = Field(default_factory=list)
    ports: list[FaultPort] = Field(default_factory=list)

    def describe(self) -> str:
        """One line for the views' "look first at": `leaf ib-leaf-07 ports 12, 14, 15
        (node-a, node-b, node-c)`, `link ib-leaf-07 port 5 (gpu-003 mlx5_10)`."""
        ports = [p.switch_port for p in self.ports if p.switch_port]
        head = f"{self.level} {self.name}"
        if ports:
            head += (" port " if len(ports) == 1 else " ports ") + ", ".join(ports)
        if self.level == "link" and self.ports:
            ends = [f"{p.node} {p.host_port}" if p.host_port else p.node for p in self.ports]
            return f"{head} ({', '.join(ends)})"
        return f"{head} ({', '.join(self.nodes)})" if self.nodes else head


class AttributionResult(BaseModel):
    """The result contract of spec section 2, plus optional detail fields."""

    job_id: str
    failed: bool
    status: Status
    category: Category | None
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
    leads: list[Lead] = Field(default_factory=list)
    fault_domain: FaultDomain | None = None
    remediation: str | None = None
    notes: list[str] = Field(default_factory=list)
    coverage: list[SourceCoverage] = Field(default_factory=list)
    analyzed_at: datetime | None = None

    def contract_json(self, **kwargs: Any) -> str:
        return self.model_dump_json(**kwargs)

"""The weekly report's model: the week, the failure classes, the counts and the offenders.

Plain pydantic over no database: the queries (stats.py, offenders.py) fill it, the views
(rows.py, charts.py, render.py, json_view.py) read it.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from typing import Literal

from pydantic import BaseModel, Field

FLEET = "fleet"
MAX_OFFENDERS = 10  # shown per kind; the report model keeps all
# Repeat offenders are infrastructure: a node blamed for a job's own Python error, OOM or
# time limit is where the job ran, not something to go and fix.
INFRA_PREFIXES = ("gpu.", "network.", "node.", "storage")
OFFENDER_KINDS = ("node", "gpu", "port", "switch", "switch_port", "nvlink_domain", "storage")
FABRIC_KINDS = ("switch", "switch_port", "nvlink_domain")  # named by the topology
LOOKBACK_WEEKS = 4  # the fabric offenders look this many weeks back, this one included
INFRA = "infrastructure"
APPLICATION = "application"
SCHEDULER = "scheduler policy"
UNEXPLAINED = "unexplained"
CLASSES = (INFRA, APPLICATION, SCHEDULER, UNEXPLAINED)
# the scheduler ended these jobs by its policy (time limit, preemption, cancellation)
POLICY_STATES = ("TIMEOUT", "PREEMPTED", "CANCELLED")


def failure_class(category: str | None, state: str | None = None) -> str:
    """The class of a failed job: by its category when attributed, else by the scheduler's
    state (a TIMEOUT, PREEMPTED or CANCELLED job is policy), else unexplained."""
    cat = category or ""
    if cat.startswith(INFRA_PREFIXES):
        return INFRA
    if cat.startswith("app."):
        return APPLICATION
    if cat.startswith("scheduler."):
        return SCHEDULER
    if (state or "").split(" ")[0].upper() in POLICY_STATES:
        return SCHEDULER
    return UNEXPLAINED


KIND_LABELS = {
    "node": "node",
    "gpu": "GPU (node/PCI id)",
    "port": "network port",
    "switch": "switch",  # without topology: `port @ nodes hit together`
    "switch_port": "switch port",
    "nvlink_domain": "NVLink domain",
    "storage": "shared storage",
}


class ReportError(ValueError):
    """Bad week or scope; the message says what is expected."""


def parse_week(week: str) -> date:
    """The Monday of `2026-W46` (ISO week) or of the week holding a date `2026-11-09`."""
    m = re.fullmatch(r"(\d{4})-?W(\d{1,2})", week.strip(), flags=re.IGNORECASE)
    try:
        if m:
            return date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
        d = date.fromisoformat(week.strip())
    except ValueError:
        raise ReportError(f"week {week!r}: expected an ISO week like 2026-W46 or a date") from None
    return d - timedelta(days=d.weekday())


def iso_week(monday: date) -> str:
    y, w, _ = monday.isocalendar()
    return f"{y}-W{w:02d}"


class WeekStats(BaseModel):
    """Counts of one week for one scope."""

    jobs: int = 0
    failed: int = 0
    pending: int = 0  # listed by the scheduler, no result yet
    by_status: dict[str, int] = Field(default_factory=dict)
    by_category: dict[str, int] = Field(default_factory=dict)  # attributed failed jobs
    gpu_hours_lost: dict[str, float] = Field(default_factory=dict)  # category or status
    gpu_hours_lost_total: float = 0.0  # over the failed jobs with a GPU count only
    failed_without_gpu_count: int = 0
    # category or status -> failed jobs of it without a GPU count (their hours are unknown)
    gpu_hours_unknown: dict[str, int] = Field(default_factory=dict)
    partial_evidence: int = 0
    ambiguous_why: dict[str, int] = Field(default_factory=dict)
    unattributed_why: dict[str, int] = Field(default_factory=dict)
    daily: dict[str, dict[str, int]] = Field(default_factory=dict)  # day -> status -> jobs
    # failure class (CLASSES) -> failed jobs / GPU-hours of those with a GPU count / jobs
    # without one
    by_class: dict[str, int] = Field(default_factory=dict)
    gpu_hours_by_class: dict[str, float] = Field(default_factory=dict)
    gpu_hours_unknown_by_class: dict[str, int] = Field(default_factory=dict)

    def rate(self, status: str) -> float:
        return self.by_status.get(status, 0) / self.failed if self.failed else 0.0

    @property
    def abstention_rate(self) -> float:
        """The failed jobs the engine did not name a cause for (ambiguous or unattributed)."""
        return self.rate("ambiguous") + self.rate("unattributed")

    @property
    def gpu_hours_known(self) -> bool:
        """Every failed job had a GPU count (no failed job: 0 is known, and true)."""
        return self.failed_without_gpu_count == 0

    @property
    def fleet_gpu_hours(self) -> float:
        """GPU-hours lost to the fleet: the infrastructure class only."""
        return self.gpu_hours_by_class.get(INFRA, 0.0)

    @property
    def fleet_gpu_hours_known(self) -> bool:
        return not self.gpu_hours_unknown_by_class.get(INFRA, 0)

    def class_hours_text(self, cls: str, fmt: str = ",.0f") -> str:
        """GPU-hours of one failure class, in the words of `gpu_hours_text`."""
        return _hours_text(self.gpu_hours_by_class.get(cls, 0.0),
                           self.gpu_hours_unknown_by_class.get(cls, 0),
                           cls in self.gpu_hours_by_class, fmt)

    def gpu_hours_text(self, key: str | None = None, fmt: str = ",.0f") -> str:
        """GPU-hours lost (of one category / status, or in all) for people: a number when
        every job counted had a GPU count; `unknown (N jobs without a GPU count)` when none
        had; `at least X (+N jobs without a GPU count)` when some had. Never a 0 that means
        "not known"."""
        hours = self.gpu_hours_lost.get(key, 0.0) if key else self.gpu_hours_lost_total
        missing = self.gpu_hours_unknown.get(key, 0) if key else self.failed_without_gpu_count
        known = key in self.gpu_hours_lost if key else len(self.gpu_hours_lost) > 0
        return _hours_text(hours, missing, known, fmt)


def _hours_text(hours: float, missing: int, known: bool, fmt: str) -> str:
    if not missing:
        return format(hours, fmt)
    jobs = f"{missing} job{'s' if missing != 1 else ''} without a GPU count"
    return f"at least {format(hours, fmt)} (+{jobs})" if known else f"unknown ({jobs})"


class Offender(BaseModel):
    """Something named as suspect in two or more jobs of the week."""

    kind: str
    name: str
    jobs: list[str]  # cluster/job_id
    categories: dict[str, int] = Field(default_factory=dict)


class FabricOffender(BaseModel):
    """A switch, a switch port or an NVLink domain (as the topology names it, from the
    results' `fault_domain`) in two or more jobs over the last `LOOKBACK_WEEKS` weeks.

    `cable_suspect`: a switch port that failed on its own (a `link` fault: one cable) in two
    or more jobs, whichever weeks they fell in. A port hit only together with its switch's
    other ports (`leaf`, `spine`) points at the switch, not at its cable."""

    kind: Literal["switch", "switch_port", "nvlink_domain"]
    name: str  # ib-leaf-07 | ib-leaf-07 port 12 | nvl72-rack-03
    jobs: list[str]  # cluster/job_id, all weeks
    weeks: dict[str, int] = Field(default_factory=dict)  # ISO week -> jobs, oldest first
    this_week: int = 0  # jobs of the report's week
    levels: dict[str, int] = Field(default_factory=dict)  # fault_domain level -> jobs
    cables: list[str] = Field(default_factory=list)  # `node-a mlx5_0`: the host ends seen
    categories: dict[str, int] = Field(default_factory=dict)
    cable_suspect: bool = False


class FailedJob(BaseModel):
    """One failed job of the week and its verdict (newest rules version)."""

    job: str  # cluster/job_id
    state: str | None = None  # the scheduler's
    status: str  # attributed | ambiguous | unattributed | pending (no result yet)
    category: str | None = None
    failure_class: str
    suspects: list[str] = Field(default_factory=list)  # suspect nodes
    summary: str | None = None
    gpu_hours: float | None = None  # None: no GPU count from the scheduler
    ended: datetime | None = None


class WeeklyReport(BaseModel):
    scope: str  # a cluster name or "fleet"
    week: str  # 2026-W46
    start: datetime
    end: datetime
    this: WeekStats
    previous: WeekStats
    offenders: list[Offender] = Field(default_factory=list)
    fabric_offenders: list[FabricOffender] = Field(default_factory=list)
    lookback_weeks: int = LOOKBACK_WEEKS
    failed_jobs: list[FailedJob] = Field(default_factory=list)  # worst first
    # category -> what it means (rules/categories.yaml, passed in by the caller: reports read
    # results, not the rules); a category without one is shown by its name
    meanings: dict[str, str] = Field(default_factory=dict)
    generated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))

    def offenders_of(self, kind: str) -> list[Offender]:
        return [o for o in self.offenders if o.kind == kind]



"""`attribution report --json`: the report's tables as one JSON object on stdout, the way
`sacct --json` and `kubectl -o json` serve scripts. Typed rows (numbers as numbers), every
failed job and offender (the pages cut long tables), and the week's counts as they are."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from attribution_dagster.reports.weekly.model import (
    FabricOffender,
    FailedJob,
    WeeklyReport,
    WeekStats,
    failure_class,
)
from attribution_dagster.reports.weekly.rows import (
    RECOMMENDS,
    category_keys,
    failed_jobs_of,
    figures,
    recommendation,
    summary_rows,
)

SCHEMA_VERSION = 1


class SummaryRow(BaseModel):
    """A row of the summary table, as the pages show it."""

    label: str
    this_week: str
    previous_week: str
    change: str


class CategoryRow(BaseModel):
    category: str  # a category, or ambiguous / unattributed / pending
    failure_class: str
    meaning: str
    failed_jobs: int
    previous_failed_jobs: int
    gpu_hours_lost: float | None  # None: a failed job of it had no GPU count
    gpu_hours_text: str  # "12", "unknown (3 jobs without a GPU count)", "at least ..."


class OffenderRow(BaseModel):
    kind: str  # node | gpu | port | switch | switch_port | nvlink_domain | storage
    name: str
    jobs_hurt: int
    jobs: list[str]
    categories: dict[str, int]
    recommendation: str


class FabricRow(FabricOffender):
    recommendation: str


class ReportJson(BaseModel):
    """The whole report for scripts; `schema_version` changes when a field is removed."""

    schema_version: int = SCHEMA_VERSION
    scope: str
    week: str
    start: datetime
    end: datetime
    generated_at: datetime
    lookback_weeks: int
    figures: dict[str, float | int | None]
    summary: list[SummaryRow]
    categories: list[CategoryRow]
    offenders: list[OffenderRow]
    fabric_offenders: list[FabricRow]
    failed_jobs: list[FailedJob]
    this_week: WeekStats
    previous_week: WeekStats
    note: str = RECOMMENDS
    files: dict[str, str] = Field(default_factory=dict)  # what `report` wrote, by kind


def report_json(rep: WeeklyReport, files: dict[str, str] | None = None) -> ReportJson:
    t, p = rep.this, rep.previous
    categories = [
        CategoryRow(
            category=k,
            failure_class=failure_class(None if k in ("ambiguous", "unattributed", "pending")
                                        else k),
            meaning=rep.meanings.get(k, k.replace("_", " ")),
            failed_jobs=failed_jobs_of(t, k),
            previous_failed_jobs=failed_jobs_of(p, k),
            gpu_hours_lost=None if t.gpu_hours_unknown.get(k) else t.gpu_hours_lost.get(k, 0.0),
            gpu_hours_text=t.gpu_hours_text(k),
        )
        for k in category_keys(rep)
    ]
    return ReportJson(
        scope=rep.scope,
        week=rep.week,
        start=rep.start,
        end=rep.end,
        generated_at=rep.generated_at,
        lookback_weeks=rep.lookback_weeks,
        figures=figures(rep),
        summary=[SummaryRow(label=r[0].strip(), this_week=r[1], previous_week=r[2], change=r[3])
                 for r in summary_rows(rep)],
        categories=categories,
        offenders=[OffenderRow(kind=o.kind, name=o.name, jobs_hurt=len(o.jobs), jobs=o.jobs,
                               categories=o.categories,
                               recommendation=recommendation(rep, o.kind, o.name))
                   for o in rep.offenders],
        fabric_offenders=[FabricRow(**f.model_dump(),
                                    recommendation=recommendation(rep, f.kind, f.name))
                          for f in rep.fabric_offenders],
        failed_jobs=rep.failed_jobs,
        this_week=t,
        previous_week=p,
        files=dict(files or {}),
    )

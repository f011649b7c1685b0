"""One report: the week's counts, the previous week's and the offenders, from the warehouse."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

from attribution_dagster.reports.weekly.model import (
    FLEET,
    LOOKBACK_WEEKS,
    FailedJob,
    WeeklyReport,
    iso_week,
    parse_week,
)
from attribution_dagster.reports.weekly.offenders import fabric_offenders, repeat_offenders
from attribution_dagster.reports.weekly.stats import week_stats, worst_first
from attribution_dagster.sinks.sql import SqlSink


def build_report(
    url: str,
    week: str | date,
    cluster: str | None = None,
    meanings: dict[str, str] | None = None,
    lookback_weeks: int = LOOKBACK_WEEKS,
) -> WeeklyReport:
    """The report of one ISO week, for one cluster or (cluster None) the whole fleet;
    `meanings` explain the categories (rules/categories.yaml); the fabric offenders look
    `lookback_weeks` weeks back (this one included)."""
    monday = parse_week(week) if isinstance(week, str) else week
    start = datetime(monday.year, monday.month, monday.day, tzinfo=timezone.utc)
    end = start + timedelta(days=7)
    sink = SqlSink(url)
    failed: list[FailedJob] = []
    return WeeklyReport(
        scope=cluster or FLEET,
        week=iso_week(monday),
        start=start,
        end=end,
        this=week_stats(sink, start, end, cluster, failed),
        previous=week_stats(sink, start - timedelta(days=7), start, cluster),
        offenders=repeat_offenders(sink, start, end, cluster),
        fabric_offenders=fabric_offenders(sink, start, end, cluster, lookback_weeks),
        lookback_weeks=lookback_weeks,
        failed_jobs=worst_first(failed),
        meanings=dict(meanings or {}),
    )


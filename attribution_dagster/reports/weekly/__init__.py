"""The weekly fleet report: what failed, what it cost in GPU-hours, who keeps hurting jobs.

Plain code over the warehouse (sinks/sql.py), no Dagster: `attribution report` and the
`weekly_report` asset both call `build_report` then `write_report`.

    build_report(url, week, cluster=None) -> WeeklyReport   (SQL aggregates, streamed)
    render_charts(report)                  -> {name: PNG bytes}  (matplotlib, Agg)
    render_html(report, charts)            -> one self-contained page (images inline)
    render_markdown(report, images)        -> Markdown next to the PNG files
    write_report(report, out_dir)          -> paths of report.html, report.md, *.png

A job belongs to the week in which it ended (`attribution_jobs.job_end`, from the
scheduler); a result with no job row (the per-job path before it recorded contexts) counts
in the week it was analysed. When a job has results under several rules versions, the
newest written one counts. GPU-hours lost = nodes x GPUs per node x duration of failed jobs;
jobs whose scheduler gave no GPU count are counted apart, never guessed.

Failures are split into four classes (`failure_class`): infrastructure (gpu.*, network.*,
node.*, storage), application (app.*), scheduler policy (scheduler.*, and any TIMEOUT,
PREEMPTED or CANCELLED job not blamed on the infrastructure or the application) and
unexplained (ambiguous, unattributed, not attributed yet). Only the infrastructure share is
"GPU-hours lost to the fleet"; a user's time limit is not the fleet's loss.

The package is split by concern: model.py (the week, classes, counts), stats.py and
offenders.py (queries over the result tables), build.py (one report), rows.py, charts.py,
render.py, json_view.py (the views) and write.py (the files). Every public name is
importable from here.
"""

from attribution_dagster.reports.weekly.build import build_report
from attribution_dagster.reports.weekly.charts import (
    chart_data,
    chart_figures,
    data_uri,
    render_charts,
)
from attribution_dagster.reports.weekly.json_view import ReportJson, report_json
from attribution_dagster.reports.weekly.model import (
    APPLICATION,
    CLASSES,
    FABRIC_KINDS,
    FLEET,
    INFRA,
    INFRA_PREFIXES,
    KIND_LABELS,
    LOOKBACK_WEEKS,
    MAX_OFFENDERS,
    OFFENDER_KINDS,
    POLICY_STATES,
    SCHEDULER,
    UNEXPLAINED,
    FabricOffender,
    FailedJob,
    Offender,
    ReportError,
    WeeklyReport,
    WeekStats,
    failure_class,
    iso_week,
    parse_week,
)
from attribution_dagster.reports.weekly.offenders import fabric_offenders, repeat_offenders
from attribution_dagster.reports.weekly.render import render_html, render_markdown
from attribution_dagster.reports.weekly.rows import (
    ACCOUNTING_NOTE,
    CABLE_SUSPECT,
    CATEGORY_HEADER,
    FABRIC_HEADER,
    FAILED_JOB_HEADER,
    OFFENDER_HEADER,
    RECOMMENDS,
    SUMMARY_HEADER,
    category_keys,
    category_rows,
    fabric_rows,
    failed_job_rows,
    figures,
    offender_rows,
    recommendation,
    summary_rows,
)
from attribution_dagster.reports.weekly.stats import (
    ambiguous_reason,
    unattributed_reason,
    week_stats,
)
from attribution_dagster.reports.weekly.write import write_report

__all__ = [
    "CABLE_SUSPECT", "FABRIC_HEADER", "FABRIC_KINDS", "FAILED_JOB_HEADER", "LOOKBACK_WEEKS",
    "RECOMMENDS", "FabricOffender", "FailedJob", "ReportJson", "fabric_offenders", "fabric_rows",
    "failed_job_rows", "figures", "recommendation", "report_json",
    "ACCOUNTING_NOTE", "APPLICATION", "CATEGORY_HEADER", "CLASSES", "FLEET", "INFRA",
    "INFRA_PREFIXES", "KIND_LABELS", "MAX_OFFENDERS", "OFFENDER_HEADER", "OFFENDER_KINDS",
    "POLICY_STATES", "SCHEDULER", "SUMMARY_HEADER", "UNEXPLAINED", "Offender", "ReportError",
    "WeekStats", "WeeklyReport", "ambiguous_reason", "build_report", "category_keys",
    "category_rows", "chart_data", "chart_figures", "data_uri", "failure_class", "iso_week",
    "offender_rows", "parse_week", "render_charts", "render_html", "render_markdown",
    "repeat_offenders", "summary_rows", "unattributed_reason", "week_stats", "write_report",
]

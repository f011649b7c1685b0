"""The weekly fleet report as a Dagster asset: one partition per (scope x ISO week).

The scope is each configured cluster, plus `fleet` for all of them together. The report
reads its week from the result tables, whichever path wrote them (per-job or window), so
it depends on `window_attributions` for lineage only (AllPartitionMapping: any window may
hold jobs that ended in the week). `weekly_report_schedule` builds last week's reports
every Monday at 06:00 UTC; older weeks are a backfill over the `week` dimension.
"""

from datetime import datetime, timedelta, timezone
from pathlib import Path

from dagster import (
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    AssetsDefinition,
    DefaultScheduleStatus,
    MaterializeResult,
    MetadataValue,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    RunRequest,
    ScheduleDefinition,
    ScheduleEvaluationContext,
    SkipReason,
    StaticPartitionsDefinition,
    WeeklyPartitionsDefinition,
    asset,
    define_asset_job,
    schedule,
)

from attribution_dagster.assets.per_window import GROUP, cluster_names
from attribution_dagster.core.config import AttributionConfig
from attribution_dagster.reports import weekly
from attribution_dagster.resources import FleetResource, SqlSinkResource
from attribution_dagster.rules.vocabulary import category_meanings

SCOPE_DIM = "scope"
WEEK_DIM = "week"
REPORT_JOB = "weekly_report_job"
PARTITION_NAME_TAG = "dagster/partition"  # Dagster's tag naming the run's partition


def report_scopes(config: AttributionConfig) -> list[str]:
    clusters = cluster_names(config)
    fleet = weekly.FLEET if weekly.FLEET not in clusters else "all-clusters"
    return [*clusters, fleet]


def report_partitions(config: AttributionConfig) -> MultiPartitionsDefinition:
    """scope (clusters + fleet) x week (Monday to Monday, UTC)."""
    weeks = WeeklyPartitionsDefinition(start_date=config.fleet.report_start, day_offset=1)
    return MultiPartitionsDefinition(
        {SCOPE_DIM: StaticPartitionsDefinition(report_scopes(config)), WEEK_DIM: weeks}
    )


def build_report_assets(config: AttributionConfig) -> list[AssetsDefinition]:
    partitions = report_partitions(config)
    clusters = set(cluster_names(config))

    @asset(
        partitions_def=partitions,
        group_name=GROUP,
        deps=[AssetDep("window_attributions", partition_mapping=AllPartitionMapping())],
        kinds={"python", "sql"},
        description="Weekly failure report: jobs by status and category, GPU-hours lost, "
        "ambiguous / unattributed rates and why, repeat offenders, change against the "
        "previous week. Charts in the metadata; HTML and Markdown on disk.",
    )
    def weekly_report(
        context: AssetExecutionContext, sink: SqlSinkResource, fleet_config: FleetResource
    ) -> MaterializeResult:
        dims = partitions.get_partition_key_from_str(context.partition_key).keys_by_dimension
        scope, week = dims[SCOPE_DIM], dims[WEEK_DIM]
        cluster = scope if scope in clusters else None
        rep = weekly.build_report(sink.client().url, week, cluster, category_meanings())
        out = Path(fleet_config.reports_dir) / rep.scope / rep.week
        paths = weekly.write_report(rep, out)
        charts = {n: paths[n].read_bytes() for n in ("failed_by_category", "gpu_hours_lost",
                                                       "jobs_per_day")}
        t = rep.this
        return MaterializeResult(
            metadata={
                "report": MetadataValue.md(
                    weekly.render_markdown(rep, {n: weekly.data_uri(b) for n, b in charts.items()})
                ),
                "html": MetadataValue.path(str(paths["html"])),
                "markdown": MetadataValue.path(str(paths["md"])),
                "jobs": MetadataValue.int(t.jobs),
                "failed": MetadataValue.int(t.failed),
                # a number only when every failed job had a GPU count; else the words
                # ("unknown (N jobs without a GPU count)"), never a 0 that means unknown
                "GPU-hours lost": MetadataValue.float(float(t.gpu_hours_lost_total))
                if t.gpu_hours_known else MetadataValue.text(t.gpu_hours_text(fmt=",.1f")),
                "failed jobs without a GPU count": MetadataValue.int(t.failed_without_gpu_count),
                # only the infrastructure share is the fleet's loss (not a user's time limit)
                "GPU-hours lost to the fleet": MetadataValue.float(t.fleet_gpu_hours)
                if t.fleet_gpu_hours_known
                else MetadataValue.text(t.class_hours_text(weekly.INFRA, fmt=",.1f")),
                **{f"{c} failures": MetadataValue.int(t.by_class.get(c, 0))
                   for c in weekly.CLASSES},
                "ambiguous rate": MetadataValue.float(round(t.rate("ambiguous"), 4)),
                "unattributed rate": MetadataValue.float(round(t.rate("unattributed"), 4)),
                "repeat offenders": MetadataValue.int(len(rep.offenders)),
            }
        )

    return [weekly_report]


def build_report_schedule(
    report_assets: list[AssetsDefinition], running: bool = True
) -> ScheduleDefinition:
    """Mondays 06:00 UTC: every scope's report of the week that just ended.

    Written out rather than `build_schedule_from_partitioned_job`, which calls the
    deprecated `run_request_for_partition` and tags each run `dagster/partition/<dimension>`
    (a tag key Dagster 2.0 rejects). Each request names its partition in the
    `dagster/partition` tag itself, so Dagster does not add the per-dimension tags."""
    [report_asset] = report_assets
    partitions = report_asset.partitions_def
    assert isinstance(partitions, MultiPartitionsDefinition)
    weeks = partitions.get_partitions_def_for_dimension(WEEK_DIM)
    scopes = partitions.get_partitions_def_for_dimension(SCOPE_DIM).get_partition_keys()
    job = define_asset_job(
        REPORT_JOB,
        selection=report_assets,
        description="Weekly failure reports (every scope of one week).",
    )

    @schedule(
        name="weekly_report_schedule",
        job=job,
        cron_schedule="0 6 * * 1",
        execution_timezone="UTC",
        default_status=DefaultScheduleStatus.RUNNING if running else DefaultScheduleStatus.STOPPED,
        description="Every scope's weekly report of the week that just ended.",
    )
    def weekly_report_schedule(
        context: ScheduleEvaluationContext,
    ) -> list[RunRequest] | SkipReason:
        now = context.scheduled_execution_time or datetime.now(timezone.utc)
        last = now.astimezone(timezone.utc).date() - timedelta(days=7)
        monday = last - timedelta(days=last.weekday())  # the week that just ended
        if monday < weeks.start.date():
            return SkipReason(f"no complete week yet (reports start {weeks.start:%Y-%m-%d})")
        week = monday.strftime(weeks.fmt)
        keys = [MultiPartitionKey({SCOPE_DIM: s, WEEK_DIM: week}) for s in scopes]
        return [RunRequest(run_key=str(k), partition_key=k, tags={PARTITION_NAME_TAG: str(k)})
                for k in keys]

    return weekly_report_schedule

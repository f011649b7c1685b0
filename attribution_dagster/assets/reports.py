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
from attribution_dagster.assets.report_metadata import report_metadata
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
        description="Weekly failure report: jobs by status and category, GPU-hours lost per "
        "failure class, abstention rates and why, failed jobs and their verdicts, repeat "
        "offenders (drain candidates: recommended, never drained), switches and switch ports "
        "across weeks, change against the previous week. Charts in the metadata; HTML and "
        "Markdown on disk, linked when fleet.report_base_url publishes them.",
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
        return MaterializeResult(
            metadata=report_metadata(rep, paths, fleet_config.report_base_url)
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

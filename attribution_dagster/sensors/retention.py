"""Keep the `jobs` partitions few: a job whose result is older than the retention is no
longer a partition (Dagster's UI slows past ~40,000 partitions of an asset). Its result
rows stay in the sink, where reports and `attribution` queries read them; the asset
store forgets its intermediate values. Fleet history lives in the window path."""

from datetime import datetime, timedelta, timezone

from dagster import (
    DefaultSensorStatus,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from attribution_dagster.assets.per_job import JOBS_PARTITIONS
from attribution_dagster.core.context import job_partition_key
from attribution_dagster.resources import AssetStoreResource, SqlSinkResource

RETENTION_SENSOR = "job_partition_retention_sensor"


def build_job_retention_sensor(
    retention_days: float, *, interval_seconds: int = 3600, max_per_tick: int = 10_000
):
    @sensor(
        name=RETENTION_SENSOR,
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description=f"Deletes `jobs` partitions whose result is older than {retention_days:g} "
        "days (results stay in the sink).",
    )
    def job_partition_retention_sensor(
        context: SensorEvaluationContext, sink: SqlSinkResource, store: AssetStoreResource
    ) -> SensorResult | SkipReason:
        cutoff = datetime.now(timezone.utc) - timedelta(days=retention_days)
        old = {
            job_partition_key(c or None, j)
            for c, j in sink.client().jobs_analyzed_before(cutoff, limit=max_per_tick)
        }
        doomed = sorted(
            context.instance.get_existing_dynamic_partitions(JOBS_PARTITIONS.name, sorted(old))
        )
        if not doomed:
            return SkipReason(f"no job partition has a result older than {retention_days:g} days")
        store.client().forget(doomed)
        context.log.info(f"deleting {len(doomed)} job partitions analysed before {cutoff:%F}")
        return SensorResult(
            dynamic_partitions_requests=[JOBS_PARTITIONS.build_delete_request(doomed)]
        )

    return job_partition_retention_sensor

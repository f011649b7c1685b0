"""One sensor per configured cluster: the scheduler's finished jobs become `jobs` runs.

Each tick asks the cluster's scheduler for jobs that ended since the cursor, minus an
overlap (accounting records land late: a job that ended a minute ago may show up only
now), drops the ones already registered, and registers at most `max_jobs_per_tick`
(a tick must finish well inside Dagster's 60 s limit). The contexts the scheduler gave
are kept in the asset store, so `execution_context` does not ask again and still knows a
Kubernetes job after its pods are gone. When the scheduler cannot answer, the tick is a
`SkipReason` naming the error and the cursor does not move: nothing is missed.
"""

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from dagster import (
    DagsterInstance,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from attribution_dagster.connectors.base import JobQuery, SourceError
from attribution_dagster.core.config import ConfigError
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.resources import AssetStoreResource, ClustersResource
from attribution_dagster.sensors.names import sensor_name
from attribution_dagster.sensors.requests import default_status, register_and_run, registered

CLUSTER_TAG = "attribution/cluster"


@dataclass
class SchedulerCursor:
    """The latest end time registered and the jobs that ended within the overlap of it."""

    watermark: datetime | None = None
    recent: set[str] = field(default_factory=set)

    @classmethod
    def parse(cls, raw: str | None) -> "SchedulerCursor":
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
            mark = datetime.fromisoformat(data["watermark"]) if data.get("watermark") else None
            return cls(watermark=mark, recent=set(data.get("recent", [])))
        except (ValueError, KeyError, TypeError):
            return cls()  # a cursor from another version: start over, dedupe still holds

    def dump(self) -> str:
        mark = self.watermark.isoformat() if self.watermark else None
        return json.dumps({"watermark": mark, "recent": sorted(self.recent)})


def build_finished_jobs_sensor(
    cluster: str,
    job: UnresolvedAssetJobDefinition,
    *,
    interval_seconds: int = 60,
    max_jobs_per_tick: int = 200,
    overlap_seconds: float = 600.0,
    first_lookback_seconds: float = 3600.0,
    enabled: bool = True,
) -> SensorDefinition:
    overlap = timedelta(seconds=overlap_seconds)

    @sensor(
        name=sensor_name(cluster),
        job=job,
        minimum_interval_seconds=interval_seconds,
        default_status=default_status(enabled),
        description=f"Registers each job of cluster {cluster!r} that finished since the last "
        "tick as a `jobs` partition and requests a run for it.",
        tags={CLUSTER_TAG: cluster},
    )
    def finished_jobs_sensor(
        context: SensorEvaluationContext, clusters: ClustersResource, store: AssetStoreResource
    ) -> SensorResult | SkipReason:
        cursor = SchedulerCursor.parse(context.cursor)
        now = datetime.now(timezone.utc)
        since = (
            cursor.watermark - overlap
            if cursor.watermark
            else now - timedelta(seconds=first_lookback_seconds)
        )
        target = clusters.client().get(cluster)
        if target is None:
            return SkipReason(f"cluster {cluster!r} is no longer configured")
        try:
            jobs = target.scheduler.finished_jobs(JobQuery(since=since, until=now))
        except (SourceError, ConfigError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return SkipReason(f"{cluster}: scheduler did not answer, cursor kept: {first}")
        taken, known, more = _unregistered(context.instance, jobs, cursor.recent, max_jobs_per_tick)
        mark = cursor.watermark
        if taken:
            last = taken[-1].end if more else max(c.end for c in jobs)
            mark = max(mark, last) if mark else last
        elif jobs:
            mark = max([mark, *(c.end for c in jobs)] if mark else [c.end for c in jobs])
        # Remember what is registered near the watermark: the next tick lists it again.
        done = cursor.recent | known | {c.partition_key for c in taken}
        recent = {
            c.partition_key
            for c in jobs
            if mark is not None and c.end >= mark - overlap and c.partition_key in done
        }
        new_cursor = SchedulerCursor(watermark=mark, recent=recent).dump()
        if not taken:
            return SensorResult(
                cursor=new_cursor,
                skip_reason=SkipReason(
                    f"{cluster}: no new finished jobs since {since.isoformat()} "
                    f"({len(jobs)} listed, all registered before)"
                ),
            )
        store.client().index_jobs(taken)
        keys = [c.partition_key for c in taken]
        if more:
            context.log.info(f"{cluster}: more finished jobs wait for the next tick")
        return register_and_run({k: {CLUSTER_TAG: cluster} for k in keys}, new_cursor)

    return finished_jobs_sensor


def _unregistered(
    instance: DagsterInstance,
    jobs: list[ExecutionContext],
    recent: set[str],
    limit: int,
) -> tuple[list[ExecutionContext], set[str], bool]:
    """The first `limit` listed jobs (by end time) that are not `jobs` partitions yet, the
    ones found registered, and whether more wait. Asks Dagster about the listed keys only:
    listing every partition would grow with the retention."""
    listed = sorted(
        (c for c in jobs if c.partition_key not in recent), key=lambda c: (c.end, c.partition_key)
    )
    known = registered(instance, (c.partition_key for c in listed))
    fresh = [c for c in listed if c.partition_key not in known]
    return fresh[:limit], known, len(fresh) > limit

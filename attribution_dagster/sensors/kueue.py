"""Record where the pods of running Kueue workloads are placed, before Kubernetes forgets.

Pods of finished jobs are garbage-collected within minutes; a failed job's node list then
exists nowhere. Each tick lists admitted, unfinished Workloads and their pods (two pod
listings per namespace) and upserts one row per pod into `attribution_pod_placements`
(sinks/placements.py); the Kueue connector reads the rows back for pods that are gone.
Rows not seen for `retention_days` are pruned. The sensor launches no runs.

A pod that starts and ends between two ticks is missed: keep the interval below the
shortest job you care about (default 60 s).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from dagster import (
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from attribution_dagster.connectors.base import SchedulerError
from attribution_dagster.sensors.names import safe_name, sensor_name
from attribution_dagster.sensors.requests import default_status


def placement_resource_key(cluster_name: str) -> str:
    """The resource key the sensor of `cluster_name` expects (a KueuePlacementResource)."""
    return f"kueue_placements_{safe_name(cluster_name)}"


def build_pod_placement_sensor(
    cluster_name: str,
    *,
    interval_seconds: int = 60,
    enabled: bool = True,
    resource_key: str | None = None,
) -> SensorDefinition:
    """The pod placement sensor of one Kueue cluster; needs `resource_key`'s resource."""
    key = resource_key or placement_resource_key(cluster_name)

    @sensor(
        name=sensor_name(cluster_name, "pod_placement"),
        minimum_interval_seconds=interval_seconds,
        required_resource_keys={key},
        default_status=default_status(enabled),
        description=f"Records where the pods of running Kueue workloads on {cluster_name} "
        "are placed, so failed jobs keep their node list after their pods are deleted.",
    )
    def pod_placement_sensor(context: SensorEvaluationContext, **resources: Any) -> SkipReason:
        resource = resources.get(key) or getattr(context.resources, key)
        try:
            pods = resource.client()
            placements = pods.kueue.running_placements()
        except SchedulerError as exc:
            if exc.transient:
                context.log.warning(str(exc))
                return SkipReason(f"{cluster_name}: {exc} (will retry next tick)")
            raise SchedulerError(f"{cluster_name}: {exc}") from None
        store = pods.store
        written = store.record(placements)
        now = datetime.now(timezone.utc)
        pruned = store.prune(now - timedelta(days=resource.retention_days))
        workloads = len({(p.namespace, p.workload) for p in placements})
        return SkipReason(
            f"{cluster_name}: recorded {written} pod placements of {workloads} running "
            f"workloads; pruned {pruned} older than {resource.retention_days:g} days"
        )

    return pod_placement_sensor

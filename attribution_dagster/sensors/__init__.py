"""Sensors: finished jobs become `jobs` partitions and runs.

- `case_directory_sensor`: new case directories under the case root;
- `<cluster>_finished_jobs_sensor`: one per configured cluster with a scheduler;
- `<cluster>_pod_placement_sensor`: Kueue clusters, where running pods are placed;
- `job_partition_retention_sensor`: old `jobs` partitions are deleted (results stay).
"""

from attribution_dagster.sensors.case_directory import Cursor, build_case_directory_sensor
from attribution_dagster.sensors.kueue import build_pod_placement_sensor, placement_resource_key
from attribution_dagster.sensors.names import sensor_name
from attribution_dagster.sensors.scheduler import SchedulerCursor, build_finished_jobs_sensor

__all__ = [
    "Cursor",
    "SchedulerCursor",
    "build_case_directory_sensor",
    "build_finished_jobs_sensor",
    "build_pod_placement_sensor",
    "placement_resource_key",
    "sensor_name",
]

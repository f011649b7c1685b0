"""Sensors: finished jobs become `jobs` partitions and runs.

- `case_directory_sensor`: new case directories under the case root;
- `<cluster>_finished_jobs_sensor`: one per configured cluster with a scheduler.
"""

from attribution_dagster.sensors.case_directory import Cursor, build_case_directory_sensor
from attribution_dagster.sensors.scheduler import (
    SchedulerCursor,
    build_finished_jobs_sensor,
    sensor_name,
)

__all__ = [
    "Cursor",
    "SchedulerCursor",
    "build_case_directory_sensor",
    "build_finished_jobs_sensor",
    "sensor_name",
]

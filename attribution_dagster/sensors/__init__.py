"""Sensors: finished jobs become `jobs` partitions and runs."""

from attribution_dagster.sensors.case_directory import Cursor, build_case_directory_sensor
from attribution_dagster.sensors.kueue import build_pod_placement_sensor, placement_resource_key

__all__ = [
    "Cursor",
    "build_case_directory_sensor",
    "build_pod_placement_sensor",
    "placement_resource_key",
]

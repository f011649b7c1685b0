"""Sensors: finished jobs become `jobs` partitions and runs."""

from attribution_dagster.sensors.case_directory import Cursor, build_case_directory_sensor

__all__ = ["Cursor", "build_case_directory_sensor"]

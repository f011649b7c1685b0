"""Names of per-cluster definitions: `<cluster>_<subject>_sensor`, the cluster's name made a
valid Dagster name (letters, digits and `_`)."""

from __future__ import annotations

import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")


def safe_name(cluster: str) -> str:
    """`h100-east` -> `h100_east`."""
    return _UNSAFE.sub("_", cluster)


def sensor_name(cluster: str, subject: str = "finished_jobs") -> str:
    """`<cluster>_<subject>_sensor`: `atlas_finished_jobs_sensor`,
    `h100_east_pod_placement_sensor`."""
    return f"{safe_name(cluster)}_{subject}_sensor"

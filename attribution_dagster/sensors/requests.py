"""What every job sensor ends with: new `jobs` partitions, one idempotent run each.

The case directory sensor and each cluster's finished-jobs sensor find jobs differently;
they register them the same way, here: ask Dagster about the found keys only (listing every
partition grows with the retention), then add the new ones and request a run per key with
`run_key` = the key, so a repeated tick requests nothing twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dagster import DagsterInstance, DefaultSensorStatus, RunRequest, SensorResult

from attribution_dagster.assets.per_job import JOBS_PARTITIONS


def default_status(enabled: bool) -> DefaultSensorStatus:
    return DefaultSensorStatus.RUNNING if enabled else DefaultSensorStatus.STOPPED


def registered(instance: DagsterInstance, keys: Iterable[str]) -> set[str]:
    """Those of `keys` that are `jobs` partitions already."""
    return set(instance.get_existing_dynamic_partitions(JOBS_PARTITIONS.name, list(keys)))


def register_and_run(tags: Mapping[str, Mapping[str, str]], cursor: str) -> SensorResult:
    """Add each key of `tags` as a `jobs` partition and request its run, tagged."""
    keys = list(tags)
    return SensorResult(
        run_requests=[RunRequest(partition_key=k, run_key=k, tags=dict(tags[k])) for k in keys],
        dynamic_partitions_requests=[JOBS_PARTITIONS.build_add_request(keys)],
        cursor=cursor,
    )

"""Per-job partitioned assets (thin wiring over `attribution_dagster.pipeline`)."""

from attribution_dagster.assets.per_job import (
    ASSET_NAMES,
    GROUP,
    JOBS_PARTITIONS,
    PER_JOB_ASSETS,
    build_job_assets,
)

__all__ = ["ASSET_NAMES", "GROUP", "JOBS_PARTITIONS", "PER_JOB_ASSETS", "build_job_assets"]

"""The Dagster code location: one `Definitions`, configured by `attribution_dagster.core.config`.

`defs` is a `@dg.definitions` function, as Dagster's docs write a code location: nothing
is built, read or installed when this module is imported; Dagster calls `defs()` when it
loads the location (`workspace.yaml`: `attribution_dagster.definitions:defs`,
`dagster dev -w workspace.yaml`, `make ui`), and `local_run` (`make run`) calls
`build_definitions` itself. Configuration: see core/config.py (YAML file and/or
ATTRIBUTION_* environment variables; secrets only from the environment). A local SQLite
instance is tuned by its own event-log storage (instance/storage.py), not from here.
"""

from __future__ import annotations

import os

from dagster import (
    AssetSelection,
    Definitions,
    EnvVar,
    define_asset_job,
    definitions,
    in_process_executor,
)

from attribution_dagster.assets import build_job_assets
from attribution_dagster.assets.per_window import build_window_assets
from attribution_dagster.assets.reports import build_report_assets, build_report_schedule
from attribution_dagster.assets.topology import build_topology_assets, build_topology_schedule
from attribution_dagster.core.config import AttributionConfig, load_config
from attribution_dagster.core.database import default_sqlite_url
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.resources import (
    AnalysisSettingsResource,
    AssetStoreResource,
    ClustersResource,
    FleetResource,
    KueuePlacementResource,
    LocalFilesResource,
    SqlSinkResource,
    StaticCasesResource,
    StdoutSinkResource,
)
from attribution_dagster.sensors import (
    build_case_directory_sensor,
    build_finished_jobs_sensor,
    build_pod_placement_sensor,
    placement_resource_key,
)
from attribution_dagster.sensors.retention import build_job_retention_sensor

ATTRIBUTE_JOB = "attribute_job"


def build_resources(config: AttributionConfig) -> dict[str, object]:
    """Resources from the config; anything read from the environment stays an `EnvVar`."""
    sink = config.sink
    if sink.url_env:
        sink_url: object = EnvVar(sink.url_env)
    else:
        sink_url = sink.url or default_sqlite_url(config.base_dir)
    password: object = EnvVar(sink.password_env) if sink.password_env else None
    if os.environ.get("ATTRIBUTION_STORE_URL"):
        store_url: object = EnvVar("ATTRIBUTION_STORE_URL")
        store_password: object = None
    elif sink.store_url:
        store_url, store_password = sink.store_url, password
    else:
        store_url, store_password = sink_url, password
    a = config.analysis
    placements = {
        placement_resource_key(name): KueuePlacementResource.for_cluster(
            name, cluster.scheduler, url=sink_url, password=password
        )
        for name, cluster in config.clusters.items()
        if cluster.scheduler is not None and cluster.scheduler.kind == "kueue"
    }
    return {
        **placements,
        "cases": StaticCasesResource(case_root=str(config.case_root_path)),
        "clusters": ClustersResource.from_configs(config.clusters),
        "files": LocalFilesResource(max_line_bytes=a.max_line_bytes, workers=a.workers),
        "analysis": AnalysisSettingsResource(
            **AnalysisSettings.of(a).model_dump(),
            fetch_retries=config.retry.max_retries,
            fetch_retry_delay_seconds=config.retry.delay_seconds,
        ),
        "store": AssetStoreResource(url=store_url, password=store_password),
        "sink": SqlSinkResource(url=sink_url, password=password),
        "stdout": StdoutSinkResource(enabled=sink.stdout),
        "fleet_config": FleetResource.from_config(config),
    }


def build_definitions(config: AttributionConfig | None = None) -> Definitions:
    config = config or load_config()
    topology_assets = build_topology_assets(config)
    assets = build_job_assets(
        max_partitions_per_run=config.max_partitions_per_run,
        topology_deps=[a.key for a in topology_assets],
    )
    job = define_asset_job(
        ATTRIBUTE_JOB,
        selection=AssetSelection.assets(*assets),  # includes the attribution checks
        # Steps take milliseconds: a subprocess per step would cost seconds.
        executor_def=in_process_executor,
        description="Attribute one or more finished jobs (all four per-job assets).",
    )
    s = config.sensor
    sensors = [
        build_case_directory_sensor(
            job,
            interval_seconds=s.interval_seconds,
            max_cases_per_tick=s.max_cases_per_tick,
            settle_seconds=s.settle_seconds,
            enabled=s.enabled,
        )
    ]
    sensors += [
        build_finished_jobs_sensor(
            name,
            job,
            interval_seconds=s.scheduler_interval_seconds,
            max_jobs_per_tick=s.max_jobs_per_tick,
            overlap_seconds=s.overlap_seconds,
            first_lookback_seconds=s.first_lookback_seconds,
            enabled=s.enabled,
        )
        for name, cluster in config.clusters.items()
        if cluster.scheduler is not None and cluster.sensor
    ]
    sensors += [
        build_pod_placement_sensor(name, enabled=s.enabled)
        for name, cluster in config.clusters.items()
        if cluster.scheduler is not None and cluster.scheduler.kind == "kueue"
    ]
    if s.retention_days is not None:
        sensors.append(build_job_retention_sensor(s.retention_days))
    window_assets = build_window_assets(config)
    report_assets = build_report_assets(config)
    schedules = [build_report_schedule(report_assets, config.fleet.report_schedule)]
    refresh = build_topology_schedule(
        topology_assets, config.topology_refresh.cron, config.topology_refresh.enabled
    )
    schedules += [refresh] if refresh is not None else []
    return Definitions(
        assets=[*assets, *window_assets, *report_assets, *topology_assets],
        jobs=[job],
        schedules=schedules,
        sensors=sensors,
        resources=build_resources(config),
        executor=in_process_executor,
    )


@definitions
def defs() -> Definitions:
    """The code location as configured now (workspace.yaml points here)."""
    return build_definitions()

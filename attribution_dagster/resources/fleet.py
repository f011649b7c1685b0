"""The fleet path's settings (`fleet:` in attribution.yaml) as a Dagster resource."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.core.config import AttributionConfig


class FleetResource(ConfigurableResource):
    """The window length, the window pool's size and where weekly reports go and are
    published (`fleet:`)."""

    window: str = Field(default="daily", description="hourly | daily")
    workers: int | None = Field(default=None, description="pool processes; None = cores - 1")
    chunk_size: int = Field(default=50, ge=1, description="jobs per pool task")
    reports_dir: str = Field(default=".attribution/reports", description="weekly reports")
    report_base_url: str | None = Field(
        default=None, description="where reports_dir is published over HTTP (None: no link)"
    )

    @classmethod
    def from_config(cls, config: AttributionConfig) -> FleetResource:
        f = config.fleet
        return cls(
            window=f.window,
            workers=f.workers,
            chunk_size=f.chunk_size,
            reports_dir=str(f.reports_path(config.base_dir)),
            report_base_url=f.report_base_url,
        )

"""Analysis knobs shared with the CLI (`AnalysisSettings`) as a Dagster resource."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.core.settings import AnalysisSettings


class AnalysisSettingsResource(ConfigurableResource):
    lead_seconds: float = Field(
        default=120.0, ge=0, description="read evidence this long before start"
    )
    lag_seconds: float = Field(default=60.0, ge=0, description="and this long after end")
    skew_seconds: float = Field(default=5.0, ge=0, description="clock skew tolerated between nodes")
    max_line_bytes: int = Field(default=65536, ge=256)
    workers: int | None = Field(default=1)
    fetch_retries: int = Field(
        default=2, ge=0, description="retries of a failed fetch inside a batched run"
    )
    fetch_retry_delay_seconds: float = Field(default=2.0, ge=0)

    def client(self) -> AnalysisSettings:
        shared = set(AnalysisSettings.model_fields) & set(type(self).model_fields)
        return AnalysisSettings(**{name: getattr(self, name) for name in shared})

"""The analysis knobs (core/settings.py `AnalysisFields`) as a Dagster resource."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.core.settings import AnalysisFields, AnalysisSettings


class AnalysisSettingsResource(ConfigurableResource, AnalysisFields):
    """`AnalysisFields` (inherited, shown in the UI) plus the batched run's fetch retries."""

    fetch_retries: int = Field(
        default=2, ge=0, description="retries of a failed fetch inside a batched run"
    )
    fetch_retry_delay_seconds: float = Field(default=2.0, ge=0)

    def client(self) -> AnalysisSettings:
        return AnalysisSettings.of(self)

"""The analysis knobs, declared once, and the time window evidence is read for."""

from __future__ import annotations

from datetime import datetime

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from attribution_dagster.core.context import ExecutionContext


class Window(BaseModel):
    """The time range evidence is read for: [job start - lead, job end + lag]."""

    model_config = ConfigDict(frozen=True)

    start: AwareDatetime
    end: AwareDatetime

    def contains(self, t: datetime) -> bool:
        return self.start <= t <= self.end


class AnalysisFields(BaseModel):
    """The analysis knobs, declared once. `AnalysisSettings` (the CLI, pipeline.py),
    attribution.yaml's `analysis:` block (core/config.py `AnalysisConfig`) and the Dagster
    resource (resources/settings.py) inherit these fields; nothing copies them by hand.
    Defaults suit most clusters."""

    lead_seconds: float = Field(
        default=120.0, ge=0, description="read evidence this long before start"
    )
    lag_seconds: float = Field(default=60.0, ge=0, description="and this long after end")
    skew_seconds: float = Field(default=5.0, ge=0, description="clock skew tolerated between nodes")
    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")
    workers: int | None = Field(default=None, description="scanner processes; None = all cores")


class AnalysisSettings(AnalysisFields):
    """The knobs one analysis runs with (CLI flags, or the configuration through the
    Dagster resource)."""

    model_config = ConfigDict(frozen=True)

    @classmethod
    def of(cls, source: object) -> AnalysisSettings:
        """The settings held by any object carrying the fields (a config block, a resource)."""
        return cls(**{name: getattr(source, name) for name in AnalysisFields.model_fields})

    def window(self, ctx: ExecutionContext) -> Window:
        from datetime import timedelta

        return Window(
            start=ctx.start - timedelta(seconds=self.lead_seconds),
            end=ctx.end + timedelta(seconds=self.lag_seconds),
        )

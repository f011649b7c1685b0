"""Local log and metric files as a Dagster resource (connector: `connectors/files/case.py`)."""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.connectors.files.case import LocalFilesClient


class LocalFilesResource(ConfigurableResource):
    """Reads `<case>/logs/<node>/*` and `<case>/metrics/*.prom`, streamed and prefiltered."""

    max_line_bytes: int = Field(default=65536, ge=256, description="longer lines are truncated")
    workers: int | None = Field(
        default=None, description="scanner processes per job; None = all cores (big cases only)"
    )

    def client(self) -> LocalFilesClient:
        return LocalFilesClient(max_line_bytes=self.max_line_bytes, workers=self.workers)

"""Static case directories as a Dagster resource (the connector is `connectors/static.py`)."""

from __future__ import annotations

from pathlib import Path

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.connectors.static.client import StaticContextClient
from attribution_dagster.core.context import ExecutionContext


class StaticCasesResource(ConfigurableResource):
    """A directory of job cases (`<case>/context.json`, `logs/`, `metrics/`)."""

    case_root: str = Field(default="samples", description="directory holding one folder per case")

    @property
    def root(self) -> Path:
        return Path(self.case_root).expanduser().resolve()

    def client(self) -> StaticContextClient:
        return StaticContextClient()

    def list_cases(self) -> list[Path]:
        """Case directories under the root (those holding a context.json), sorted."""
        if not self.root.is_dir():
            return []
        return sorted(self.client().list_cases(self.root))

    def load(self, case_dir: str | Path) -> ExecutionContext:
        """The execution context of one case; raises ContextError naming file and field."""
        return self.client().load(Path(case_dir))

    def find(self, partition_key: str) -> Path | None:
        """Slow path: the case under the root whose context has this partition key."""
        client = self.client()
        for case in self.list_cases():
            try:
                if client.load(case).partition_key == partition_key:
                    return case
            except Exception:  # noqa: BLE001 - a malformed case is not the one we look for
                continue
        return None

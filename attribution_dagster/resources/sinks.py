"""Result sinks and the intermediate asset store as Dagster resources.

URLs may carry a password only when they come from the environment (`EnvVar`), so the
Dagster UI shows the variable name; a separate `password` (also an `EnvVar`) is merged
into a password-less URL at connection time.
"""

from __future__ import annotations

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.core.config import with_password
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sinks.sql import SqlSink
from attribution_dagster.sinks.stdout import StdoutSink


class SqlSinkResource(ConfigurableResource):
    """Results database: a SQLite file by default, or any SQLAlchemy URL."""

    url: str = Field(description="SQLAlchemy URL, e.g. sqlite:////abs/results.db")
    password: str | None = Field(default=None, description="set from an env var, never in YAML")

    def client(self) -> SqlSink:
        return SqlSink(with_password(self.url, self.password))


class StdoutSinkResource(ConfigurableResource):
    """Prints each result as one JSON line on the run's stdout when enabled."""

    enabled: bool = False

    def client(self) -> StdoutSink | None:
        return StdoutSink() if self.enabled else None


class AssetStoreResource(ConfigurableResource):
    """Partition-aware store of intermediate asset values (see sinks/asset_store.py)."""

    url: str = Field(description="SQLAlchemy URL; by default the results database")
    password: str | None = None

    def client(self) -> AssetValueStore:
        return AssetValueStore(with_password(self.url, self.password))

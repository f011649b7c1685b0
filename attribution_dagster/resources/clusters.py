"""The configured clusters (attribution.yaml `clusters:`) as a Dagster resource.

Each cluster's scheduler and evidence sources are plain connectors (connectors/); this
resource only turns the validated configuration into `Cluster` objects, built once per
process. The configuration holds no secrets (only the names of environment variables),
so the UI may show it.
"""

from __future__ import annotations

import json
from functools import cached_property

from dagster import ConfigurableResource
from pydantic import Field, PrivateAttr

from attribution_dagster.connectors.clusters import Cluster, check_clusters, clusters_from
from attribution_dagster.core.config import ClusterConfig


class ClustersResource(ConfigurableResource):
    clusters_json: str = Field(
        default="{}", description="the `clusters:` block of attribution.yaml, as JSON"
    )
    _built: dict[str, Cluster] | None = PrivateAttr(default=None)

    @classmethod
    def from_configs(cls, configs: dict[str, ClusterConfig]) -> ClustersResource:
        check_clusters(configs)  # a bad back-end key fails when the definitions load
        data = {name: cfg.model_dump(mode="json") for name, cfg in configs.items()}
        return cls(clusters_json=json.dumps(data, sort_keys=True))

    @cached_property
    def _configs(self) -> dict[str, ClusterConfig]:
        raw = json.loads(self.clusters_json or "{}")
        return {name: ClusterConfig.model_validate(cfg) for name, cfg in raw.items()}

    def client(self) -> dict[str, Cluster]:
        """The configured clusters by name (`.get(name)`: None for an unknown or no name)."""
        if self._built is None:
            self._built = clusters_from(self._configs)
        return self._built

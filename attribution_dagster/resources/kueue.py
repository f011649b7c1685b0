"""The Kueue cluster and placement record a pod placement sensor works with."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from dagster import ConfigurableResource
from pydantic import Field

from attribution_dagster.connectors.kueue.client import KueueClient, KueueConfig
from attribution_dagster.connectors.kueue.placements import PlacementStore
from attribution_dagster.core.config import with_password


class KueuePlacementResource(ConfigurableResource):
    """One Kueue cluster (its `scheduler` block as JSON) and the database of its placements.

    Build it with `KueuePlacementResource.for_cluster(name, kueue_config, url, password)`;
    `password` should be an `EnvVar` so the UI shows the variable's name only.
    """

    cluster: str = Field(description="cluster name as in attribution.yaml")
    scheduler_json: str = Field(description="the cluster's `scheduler: {kind: kueue}` block")
    url: str = Field(description="SQLAlchemy URL of the results database")
    password: str | None = Field(default=None, description="set from an env var, never in YAML")
    retention_days: float = Field(default=14.0, gt=0, description="forget pods unseen this long")

    @classmethod
    def for_cluster(
        cls, cluster: str, scheduler: KueueConfig, url: Any, password: Any = None, **kw: Any
    ) -> KueuePlacementResource:
        return cls(
            cluster=cluster,
            scheduler_json=scheduler.model_dump_json(),
            url=url,
            password=password,
            **kw,
        )

    def scheduler_config(self) -> KueueConfig:
        return KueueConfig.model_validate(json.loads(self.scheduler_json))

    def client(self, **kw: Any) -> PodPlacements:
        """The cluster's Kueue client and the record of its pods' placements."""
        return PodPlacements(
            kueue=self.scheduler_config().client(self.cluster, **kw),
            store=PlacementStore(with_password(self.url, self.password)),
        )


@dataclass(frozen=True)
class PodPlacements:
    """What the pod placement sensor works with: where to list running pods, where to
    record them."""

    kueue: KueueClient
    store: PlacementStore

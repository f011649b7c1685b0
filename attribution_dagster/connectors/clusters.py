"""A configured cluster's clients, built from its `ClusterConfig` (attribution.yaml).

The CLI, the assets and the sensors all reach a cluster's scheduler and evidence sources
through `Cluster`, so `attribution analyze atlas/4412201` and the Dagster path read the
same back-ends the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from attribution_dagster.connectors.base import LogSource, MetricSource, SchedulerClient
from attribution_dagster.core.config import ClusterConfig, ConfigError


@dataclass(frozen=True)
class EvidenceSources:
    """The log and metric sources one job's evidence is read from."""

    logs: tuple[LogSource, ...] = ()
    metrics: tuple[MetricSource, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.logs or self.metrics)


@dataclass
class Cluster:
    name: str
    config: ClusterConfig = field(default_factory=ClusterConfig)

    @cached_property
    def scheduler(self) -> SchedulerClient:
        if self.config.scheduler is None:
            raise ConfigError(
                f"cluster {self.name!r} has no scheduler configured "
                "(clusters.<name>.scheduler in attribution.yaml)"
            )
        return self.config.scheduler.client(self.name)  # type: ignore[no-any-return]

    @property
    def scheduler_kind(self) -> str | None:
        return self.config.scheduler.kind if self.config.scheduler is not None else None

    @cached_property
    def sources(self) -> EvidenceSources:
        return EvidenceSources(
            logs=tuple(b.client(self.name) for b in self.config.logs),
            metrics=tuple(b.client(self.name) for b in self.config.metrics),
        )


def clusters_from(configs: Mapping[str, ClusterConfig]) -> dict[str, Cluster]:
    return {name: Cluster(name, cfg) for name, cfg in configs.items()}


def split_job_ref(ref: str, clusters: Mapping[str, object]) -> tuple[str, str] | None:
    """`atlas/4412201` -> ("atlas", "4412201") when `atlas` is a configured cluster.
    Kueue job ids may hold a slash themselves (`atlas/team-a/llama-70b`)."""
    name, sep, job = ref.partition("/")
    if sep and job and name in clusters:
        return name, job
    return None

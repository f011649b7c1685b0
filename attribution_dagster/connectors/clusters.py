"""A configured cluster's clients, built from its `ClusterConfig` (attribution.yaml).

The CLI, the assets and the sensors all reach a cluster's scheduler and evidence sources
through `Cluster`, so `attribution analyze atlas/4412201` and the Dagster path read the
same back-ends the same way.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import (
    BackendConfig,
    LogSource,
    MetricSource,
    SchedulerClient,
)
from attribution_dagster.connectors.topology.source import (
    CachedTopologySource,
    TopologySource,
)
from attribution_dagster.core.config import (
    CONFIG_ENV,
    DEFAULT_CONFIG_FILE,
    AttributionConfig,
    BackendBlock,
    ClusterConfig,
    ConfigError,
    load_config,
)


@dataclass(frozen=True)
class EvidenceSources:
    """The log and metric sources one job's evidence is read from, and the cluster's
    topology sources (where its nodes sit in the fabric)."""

    logs: tuple[LogSource, ...] = ()
    metrics: tuple[MetricSource, ...] = ()
    dumps: str | None = None  # the flight-recorder dump directory template (ClusterConfig)
    topology: tuple[TopologySource, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.logs or self.metrics)

    def dump_dir(self, cluster: str | None, job_id: str) -> Path | None:
        """The job's dump directory from the template; None when none is configured."""
        if not self.dumps:
            return None
        return Path(self.dumps.format(cluster=cluster or "", job_id=job_id))


@dataclass
class Cluster:
    """A cluster's back-ends. Building one validates every block of its configuration into
    its back-end's model (ConfigError naming the cluster, block and key); the clients are
    built on first use."""

    name: str
    config: ClusterConfig = field(default_factory=ClusterConfig)
    scheduler_config: Any = field(init=False, default=None)
    log_configs: tuple[Any, ...] = field(init=False, default=())
    metric_configs: tuple[Any, ...] = field(init=False, default=())
    topology_configs: tuple[Any, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        where = f"clusters.{self.name}"
        cfg = self.config
        if cfg.scheduler is not None:
            self.scheduler_config = backend_config("scheduler", cfg.scheduler, f"{where}.scheduler")
        self.log_configs = tuple(
            backend_config("logs", b, f"{where}.logs[{i}]") for i, b in enumerate(cfg.logs)
        )
        self.metric_configs = tuple(
            backend_config("metrics", b, f"{where}.metrics[{i}]") for i, b in enumerate(cfg.metrics)
        )
        self.topology_configs = tuple(
            backend_config("topology", b, f"{where}.topology[{i}]")
            for i, b in enumerate(cfg.topology)
        )

    @cached_property
    def scheduler(self) -> SchedulerClient:
        if self.scheduler_config is None:
            raise ConfigError(
                f"cluster {self.name!r} has no scheduler configured "
                "(clusters.<name>.scheduler in attribution.yaml)"
            )
        return self.scheduler_config.client(self.name)  # type: ignore[no-any-return]

    @property
    def scheduler_kind(self) -> str | None:
        return self.config.scheduler.kind if self.config.scheduler is not None else None

    @cached_property
    def sources(self) -> EvidenceSources:
        return EvidenceSources(
            logs=tuple(b.client(self.name) for b in self.log_configs),
            metrics=tuple(b.client(self.name) for b in self.metric_configs),
            dumps=self.config.dumps,
            topology=self.topology_sources,
        )

    @cached_property
    def topology_sources(self) -> tuple[TopologySource, ...]:
        """The cluster's topology sources, each read at most every 10 minutes."""
        return tuple(CachedTopologySource(b.client(self.name)) for b in self.topology_configs)


def backend_config(role: str, block: BackendBlock, where: str) -> BackendConfig:
    """The block validated into its back-end's model; ConfigError says where and what:
    `clusters.atlas.logs[0] (loki): field 'url': url must be http(s)://...`."""
    try:
        return parse_config(role, block.keys)  # type: ignore[no-any-return]
    except ValidationError as e:
        problems = []
        for err in e.errors()[:3]:
            key = ".".join(str(x) for x in err["loc"]) or "(block)"
            problems.append(f"key '{key}': {str(err['msg']).removeprefix('Value error, ')}")
        more = f" (and {e.error_count() - 3} more)" if e.error_count() > 3 else ""
        raise ConfigError(f"{where} ({block.kind}): {'; '.join(problems)}{more}") from None
    except ValueError as e:  # unknown kind, a back-end that cannot load here
        raise ConfigError(f"{where}: {e}") from None


def clusters_from(configs: Mapping[str, ClusterConfig]) -> dict[str, Cluster]:
    """Every configured cluster, each block validated (ConfigError at the first bad one)."""
    return {name: Cluster(name, cfg) for name, cfg in configs.items()}


def load_checked_config(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> AttributionConfig:
    """`core.config.load_config`, then every back-end block validated: one ConfigError
    naming the file, cluster, block and key (the CLI's exit 2) before anything runs."""
    env = os.environ if environ is None else environ
    config = load_config(path, environ)
    check_clusters(config.clusters, str(path or env.get(CONFIG_ENV) or DEFAULT_CONFIG_FILE))
    return config


def check_clusters(configs: Mapping[str, ClusterConfig], source: str = "") -> None:
    """Validate every block of every cluster now, so a bad key fails when the configuration
    is loaded (naming the file when `source` is given), not at a job's first fetch."""
    try:
        clusters_from(configs)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}" if source else str(e)) from None


def split_job_ref(ref: str, clusters: Mapping[str, object]) -> tuple[str, str] | None:
    """`atlas/4412201` -> ("atlas", "4412201") when `atlas` is a configured cluster.
    Kueue job ids may hold a slash themselves (`atlas/team-a/llama-70b`)."""
    name, sep, job = ref.partition("/")
    if sep and job and name in clusters:
        return name, job
    return None

"""Plain clients for schedulers, log back-ends and metric back-ends (no Dagster import).

Every back-end is one folder here holding its configuration model (`kind: <name>` plus its
own keys, as written under `clusters.<name>` in attribution.yaml) and its client. The
tables below map a `kind` to that configuration model, imported only when a cluster uses
it; adding a back-end is one folder and one line here. core/config.py keeps each block as
written (core.config.BackendBlock); `parse_config` validates one into its back-end's model
(connectors/clusters.py does it for every block when the configuration is loaded). The
roles' protocols are in `connectors/base.py`.
"""

from __future__ import annotations

import importlib
from typing import Any

SCHEDULER_KINDS: dict[str, str] = {
    "slurm": "attribution_dagster.connectors.slurm.client:SlurmConfig",
    "kueue": "attribution_dagster.connectors.kueue.client:KueueConfig",
    "kai": "attribution_dagster.connectors.kai.client:KaiConfig",
    "static": "attribution_dagster.connectors.static.client:StaticSchedulerConfig",
}
LOG_KINDS: dict[str, str] = {
    "files": "attribution_dagster.connectors.files.tree:FilesSourceConfig",
    "loki": "attribution_dagster.connectors.loki.client:LokiConfig",
    "pod_logs": "attribution_dagster.connectors.pod_logs.client:PodLogsConfig",
    "elasticsearch": "attribution_dagster.connectors.elasticsearch.client:ElasticsearchConfig",
    "opensearch": "attribution_dagster.connectors.opensearch.client:OpenSearchConfig",
}
METRIC_KINDS: dict[str, str] = {
    "prometheus": "attribution_dagster.connectors.prometheus.client:PrometheusConfig",
}
TOPOLOGY_KINDS: dict[str, str] = {
    "files": "attribution_dagster.connectors.topology.files:TopologyFilesConfig",
    "slurm_scontrol": "attribution_dagster.connectors.topology.live:ScontrolTopologyConfig",
    "kubernetes_labels": "attribution_dagster.connectors.topology.live:KubeLabelsTopologyConfig",
}
ROLES: dict[str, dict[str, str]] = {
    "scheduler": SCHEDULER_KINDS,
    "logs": LOG_KINDS,
    "metrics": METRIC_KINDS,
    "topology": TOPOLOGY_KINDS,
}


def config_model(role: str, kind: str) -> type[Any]:
    """The configuration model of `kind` in `role`; ValueError names the kinds known."""
    table = ROLES[role]
    if kind not in table:
        raise ValueError(f"unknown {role} kind {kind!r} (known: {', '.join(sorted(table))})")
    module, _, name = table[kind].partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{role} kind {kind!r} is not available here ({exc})") from None


def parse_config(role: str, data: Any) -> Any:
    """Validate one `{kind: ..., ...}` block of `role` into its model."""
    if not isinstance(data, dict):
        raise ValueError(f"a {role} block must be a mapping with a 'kind' key")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"a {role} block needs 'kind' ({', '.join(sorted(ROLES[role]))})")
    return config_model(role, kind).model_validate(data)

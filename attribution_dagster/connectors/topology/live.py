"""Live topology: `scontrol show topology` through the Slurm connector, and Topograph's node
labels through the Kubernetes API. Each read is one snapshot taken now."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from attribution_dagster.connectors.base import BackendConfig, SourceError, utc_now
from attribution_dagster.core.formats.topology import read_topology_conf, topology_from_nodes
from attribution_dagster.core.topology import TopologySnapshots


class ScontrolTopologyConfig(BackendConfig):
    """`{kind: slurm_scontrol}`: slurmctld's topology (topology/tree or topology/block)."""

    kind: Literal["slurm_scontrol"] = "slurm_scontrol"
    scontrol: str = Field(default="scontrol", description="scontrol binary (name or path)")
    slurm_conf: str | None = Field(default=None, description="SLURM_CONF for scontrol")

    def client(self, cluster: str) -> ScontrolTopologySource:
        return ScontrolTopologySource(self, cluster)


class ScontrolTopologySource:
    """Runs `scontrol show topology` with the Slurm connector's command runner (its
    environment, timeout and error wording), then reads it like topology.conf."""

    def __init__(self, config: ScontrolTopologyConfig, cluster: str, runner: Any = None) -> None:
        from attribution_dagster.connectors.slurm.config import SlurmKeys
        from attribution_dagster.connectors.slurm.sacct import SacctClient

        keys = SlurmKeys(
            scontrol=config.scontrol,
            slurm_conf=config.slurm_conf,
            timeout_seconds=config.timeout_seconds,
        )
        self.client = SacctClient(keys, cluster, runner=runner)
        self.name = config.source_name

    def snapshots(self) -> TopologySnapshots:
        text = self.client.show_topology()
        topo = read_topology_conf(text, "scontrol show topology")
        if topo.is_empty():
            first = (text.strip().splitlines() or ["no output"])[0]
            raise SourceError(f"scontrol show topology: no topology ({first[:200]})")
        topo.taken_at = utc_now()
        return TopologySnapshots(snapshots=[topo])


class KubeLabelsTopologyConfig(BackendConfig):
    """`{kind: kubernetes_labels, ...}`: NVIDIA Topograph's node labels (and
    `nvidia.com/gpu.clique`), read from the API's node list."""

    kind: Literal["kubernetes_labels"] = "kubernetes_labels"
    api_url: str | None = None
    in_cluster: bool = False
    kubeconfig: str | None = None
    context: str | None = None
    token_env: str | None = None
    verify_tls: bool = True
    label_selector: str | None = Field(
        default=None, description="only these nodes (e.g. nvidia.com/gpu.present=true)"
    )

    def client(self, cluster: str) -> KubeLabelsTopologySource:
        return KubeLabelsTopologySource(self)


class KubeLabelsTopologySource:
    def __init__(self, config: KubeLabelsTopologyConfig) -> None:
        self.config = config
        self.name = config.source_name

    def _nodes(self) -> dict[str, Any]:
        from attribution_dagster.connectors.kubernetes.api import KubeConfigError, build_api_client

        c = self.config
        try:
            api = build_api_client(
                api_url=c.api_url,
                in_cluster=c.in_cluster,
                kubeconfig=c.kubeconfig,
                context=c.context,
                token_env=c.token_env,
                verify_tls=c.verify_tls,
            )
        except KubeConfigError as exc:
            raise SourceError(str(exc)) from None
        from kubernetes.client import CoreV1Api
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        items: list[Any] = []
        token: str | None = None
        try:
            while True:  # pages of 500 nodes
                kwargs: dict[str, Any] = {"limit": 500, "_preload_content": False}
                kwargs["_request_timeout"] = c.timeout_seconds
                if c.label_selector:
                    kwargs["label_selector"] = c.label_selector
                if token:
                    kwargs["_continue"] = token
                resp = CoreV1Api(api).list_node(**kwargs)
                page = json.loads(resp.data)
                items += page.get("items") or []
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    break
        except ApiException as exc:
            transient = exc.status in (429, 500, 502, 503, 504)
            reason = _status_message(exc.body) or exc.reason
            raise SourceError(
                f"Kubernetes API: list nodes: {exc.status} {reason}", transient=transient
            ) from None
        except (HTTPError, OSError) as exc:
            raise SourceError(f"Kubernetes API: list nodes: {exc}", transient=True) from None
        finally:
            api.close()
        return {"kind": "NodeList", "items": items}

    def snapshots(self) -> TopologySnapshots:
        topo = topology_from_nodes(self._nodes(), "kubernetes: nodes")
        topo.taken_at = utc_now()
        return TopologySnapshots(snapshots=[topo])


def _status_message(body: Any) -> str | None:
    try:
        return str(json.loads(body).get("message")) or None
    except (TypeError, ValueError, AttributeError):
        return None

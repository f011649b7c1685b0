"""Readers of the standard topology forms, each a pure function text -> core Topology
(issue 23): Slurm `topology.conf` / `scontrol show topology` / `topology.yaml`,
`ibnetdiscover`, `lldpctl -f json`, and Kubernetes node labels (`kubectl get nodes -o
json`). Shared by the topology connector (files and live), the Slurm and Kubernetes
clients, and the pipeline; a bad line is a recorded error, never an exception."""

from attribution_dagster.core.formats.topology.directory import (
    read_snapshots,
    read_topology_dir,
    read_topology_file,
)
from attribution_dagster.core.formats.topology.ibnetdiscover import read_ibnetdiscover
from attribution_dagster.core.formats.topology.kube_labels import (
    read_nodes_json,
    topology_from_nodes,
)
from attribution_dagster.core.formats.topology.lldp import read_lldp_json
from attribution_dagster.core.formats.topology.slurm import read_topology_conf, read_topology_yaml

__all__ = [
    "read_ibnetdiscover",
    "read_lldp_json",
    "read_nodes_json",
    "read_snapshots",
    "read_topology_conf",
    "read_topology_dir",
    "read_topology_file",
    "read_topology_yaml",
    "topology_from_nodes",
]

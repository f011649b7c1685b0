"""One normalization of host names for every connector, context and peer resolution.

Telemetry names a node many ways: `gpu-017`, `GPU-017.cluster.local`, `gpu-017:9400`
(Prometheus `instance`), `[fd00::17]:9400`, `10.1.0.17`, or a Kubernetes node name that
differs from the host name. `NodeIndex` resolves any of them to the job's own node name,
using the context's `node_addresses` for IPs and aliases.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from attribution_dagster.models import short_host

_HOST_PORT = re.compile(r"^(?P<host>[^\s:\[\]]+):(?P<port>\d{1,5})$")
_V6_PORT = re.compile(r"^\[(?P<host>[0-9A-Fa-f:.]+)\](?::\d{1,5})?$")


def strip_port(value: str) -> str:
    """`gpu-017:9400` -> `gpu-017`, `[fd00::1]:9400` -> `fd00::1`; anything else unchanged."""
    value = value.strip()
    m = _V6_PORT.match(value)
    if m:
        return m.group("host")
    m = _HOST_PORT.match(value)
    return m.group("host") if m else value


def host_key(name: str) -> str:
    """The comparison key of a host spelling: port stripped, lower case, domain dropped
    (IP addresses kept whole)."""
    return short_host(strip_port(name))


class NodeIndex:
    """Resolves host spellings to the job's node names (exact first, then by `host_key`)."""

    def __init__(
        self, nodes: Iterable[str], addresses: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        self.nodes: list[str] = list(dict.fromkeys(nodes))
        self._exact = set(self.nodes)
        self._by_key: dict[str, str] = {}
        for node in self.nodes:
            self._by_key.setdefault(host_key(node), node)
        for node, names in (addresses or {}).items():
            target = self._exact_or_key(node)
            if target is None:
                continue
            for alias in names:
                self._by_key.setdefault(host_key(str(alias)), target)

    @classmethod
    def of(cls, ctx: object) -> NodeIndex:
        """The index of an ExecutionContext: its nodes, `node_addresses`, and its Kubernetes
        pods (`pod`, `namespace/pod` and the host IP name the node the pod ran on)."""
        addresses = {
            k: list(v) for k, v in (getattr(ctx, "node_addresses", None) or {}).items()
        }
        for pod in getattr(ctx, "pods", None) or []:
            if pod.node:
                names = [pod.name, f"{pod.namespace}/{pod.name}"] + [pod.host_ip or ""]
                addresses.setdefault(pod.node, []).extend(n for n in names if n)
        return cls(getattr(ctx, "nodes", []), addresses)

    def _exact_or_key(self, name: str) -> str | None:
        if name in self._exact:
            return name
        return self._by_key.get(host_key(name))

    def resolve(self, name: str | None) -> str | None:
        """The job node `name` refers to, or None when it names no node of the job."""
        if not name:
            return None
        return self._exact_or_key(name.strip())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

"""One normalization of host names for every connector, context and peer resolution.

Telemetry names a node many ways: `gpu-017`, `GPU-017.cluster.local`, `gpu-017:9400`
(Prometheus `instance`), `[fd00::17]:9400`, `10.1.0.17`, or a Kubernetes node name that
differs from the host name. `NodeIndex` resolves any of them to the job's own node name,
using the context's `node_addresses` for IPs and aliases.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from attribution_dagster.core.context import short_host
from attribution_dagster.core.hostlist import (  # noqa: F401 - re-exported
    HOSTLIST_MAX,
    expand_hostlist_lenient,
    split_hostlist,
)

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


_last_index: tuple[object, NodeIndex] | None = None


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
        addresses = {k: list(v) for k, v in (getattr(ctx, "node_addresses", None) or {}).items()}
        for pod in getattr(ctx, "pods", None) or []:
            if pod.node:
                names = [pod.name, f"{pod.namespace}/{pod.name}"] + [pod.host_ip or ""]
                addresses.setdefault(pod.node, []).extend(n for n in names if n)
        return cls(getattr(ctx, "nodes", []), addresses)

    @classmethod
    def cached(cls, ctx: object) -> NodeIndex:
        """`of(ctx)`, built once for the context most recently asked about (the parser
        catalog resolves hosts of many records of one context in a row)."""
        global _last_index
        last = _last_index
        if last is not None and last[0] is ctx:
            return last[1]
        index = cls.of(ctx)
        _last_index = (ctx, index)
        return index

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

    def resolve_all(self, expr: str | None) -> list[str]:
        """The job nodes a host name or Slurm hostlist (`cn-[0410-0411],cn-0415`) names,
        in order, each once."""
        if not expr:
            return []
        one = self.resolve(expr)
        if one is not None:
            return [one]
        out: dict[str, None] = {}
        for name in expand_hostlist(expr):
            node = self.resolve(name)
            if node is not None:
                out[node] = None
        return list(out)

    def named_in(self, text: str) -> list[str]:
        """The job nodes a free-text line names (`Nodes cn-0410 not responding`,
        `node/gpu-7 ... NodeNotReady`, a syslog host field), in order of appearance."""
        out: dict[str, None] = {}
        for m in _TOKEN.finditer(text):
            token = m.group().rstrip(".-")
            if "[" in token and not token.startswith("["):
                for node in self.resolve_all(token):
                    out[node] = None
                continue
            node = self.resolve(token)
            if node is not None:
                out[node] = None
        return list(out)


# --- label regexes ---------------------------------------------------------------------

_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_RE2_META = frozenset("\\.+*?()|[]{}^$")


def re2_escape(literal: str) -> str:
    """A literal as an RE2 pattern matching exactly it (only RE2's metacharacters escaped)."""
    return "".join("\\" + ch if ch in _RE2_META else ch for ch in literal)


def node_regex(nodes: Iterable[str], addresses: Mapping[str, Iterable[str]] | None = None) -> str:
    """The one label regex (RE2, anchored at both ends by Loki and Prometheus) matching the
    nodes and their `node_addresses` aliases in every spelling a label may carry: any case
    (`(?i)`), any domain after a short name, any port (`instance="gpu-017:9100"`), IPv4
    whole (never cut at its first dot), IPv6 in optional brackets."""
    keys: set[str] = set()
    for node in nodes:
        keys.add(host_key(node))
        for alias in (addresses or {}).get(node, ()):
            keys.add(host_key(str(alias)))
    keys.discard("")
    names = sorted(k for k in keys if ":" not in k and not _IPV4.match(k))
    ipv4 = sorted(k for k in keys if _IPV4.match(k))
    ipv6 = sorted(k for k in keys if ":" in k)
    parts = []
    if names:
        parts.append("(?:" + "|".join(map(re2_escape, names)) + r")(?:\.[^:]*)?")
    if ipv4:
        parts.append("(?:" + "|".join(map(re2_escape, ipv4)) + ")")
    if ipv6:
        parts.append(r"\[?(?:" + "|".join(map(re2_escape, ipv6)) + r")\]?")
    return "(?i)(?:" + "|".join(parts) + ")(?::[0-9]+)?"


# --- cluster-level lines -----------------------------------------------------------------

CLUSTER_NODE = "*cluster*"
"""`RawRecord.node` of a line from a cluster-level source (slurmctld.log, a Kubernetes event
listing, a central syslog): no node wrote it. The parser catalog moves each observation of
such a line to the job node(s) the line names (`Nodes cn-0410 not responding`) and drops the
rest; a connector may drop lines naming no job node before that (context only)."""

# one hostlist expander for every layer (core/hostlist.py); free text is lenient
expand_hostlist = expand_hostlist_lenient


# host-like tokens of a free-text line: names (with brackets for hostlists), IPv4, [v6]
_TOKEN = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[\w.-]|\[[\d,\-]+\])*")

"""`ibnetdiscover` output: which host HCA port is cabled to which switch port.

Each node is a block: `key=value` header lines, a `Switch <nports> "S-<guid>" # "<desc>" ...`
or `Ca <nports> "H-<guid>" # "<desc>"` line, then one line per connected port:
`[<port>]["(<port guid>)"] "<peer>"[<peer port>]["(<peer port guid>)"] # ... "<peer desc>" ...`.
A cable is read from either end (a switch's port line whose peer is a CA, or a CA's port
line) and kept once. Names follow the spec: a switch is the host name inside
`MF0;<name>:<model>/U1`, a single-word (node-name-mapped) description as written, else
`0x<guid>`; a host is the first word of its CA description and the HCA the second
(`"gpu-a01 mlx5_3"`). The leaf of a host is the switch its CA ports hang on, a spine one
linked to leaves, a core one linked to spines. Format facts: TOPOLOGY-FACTS.md s1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from attribution_dagster.core.topology import Cable, Switch, Topology

_NODE = re.compile(
    r'^(?P<type>Switch|Ca|Rt)\s+(?P<nports>\d+)\s+"(?P<id>[SHR]-[0-9A-Fa-f]+)"'
    r'(?:\s*#\s*"(?P<desc>[^"]*)")?'
)
_PORT = re.compile(
    r"^\[(?P<port>\d+)\](?:\[ext \d+\])?(?:\((?P<guid>[0-9A-Fa-f]+)\))?\s*"
    r'"(?P<peer>[SHR]-[0-9A-Fa-f]+)"\[(?P<pport>\d+)\](?:\[ext \d+\])?'
    r"(?:\((?P<pguid>[0-9A-Fa-f]+)\))?(?P<rest>.*)$"
)
_QUOTED = re.compile(r'"([^"]*)"')
_MF0 = re.compile(r"^MF0;(?P<name>[^:]+):")
_GENERATED = re.compile(r"^#\s*Topology file:\s*generated on\s+(?P<when>.+?)\s*$", re.MULTILINE)
_GENERIC = ("mellanox technologies", "nvidia", "switchib", "quantum", "infiniscale")


@dataclass
class _Node:
    type: str
    guid: str
    desc: str
    line: int
    ports: list[tuple[int, str | None, str, int, str | None, str]] = field(default_factory=list)


def switch_name(desc: str, guid: str) -> str:
    """`MF0;ib-leaf-02:MQM9700/U1` -> `ib-leaf-02`; a one-word mapped name as written; a
    generic vendor string or nothing -> `0x<guid>`."""
    m = _MF0.match(desc.strip())
    if m:
        return m.group("name").strip()
    word = desc.strip()
    if word and " " not in word and not any(g in word.lower() for g in _GENERIC):
        return word
    return f"0x{guid.lower()}"


def generated_at(text: str) -> datetime | None:
    """The `# Topology file: generated on <ctime>` header's time (UTC), if any."""
    m = _GENERATED.search(text[:4096])
    if not m:
        return None
    for fmt in ("%a %b %d %H:%M:%S %Y", "%a %b %d %H:%M:%S %Z %Y"):
        try:
            return datetime.strptime(" ".join(m.group("when").split()), fmt).replace(
                tzinfo=timezone.utc
            )
        except ValueError:
            continue
    return None


def read_ibnetdiscover(text: str, source: str = "ibnetdiscover.txt") -> Topology:
    """ibnetdiscover output -> switches (named, tiered, with GUIDs) and host cables."""
    nodes: dict[str, _Node] = {}
    errors: list[str] = []
    cur: _Node | None = None
    for num, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _NODE.match(line)
        if m:
            guid = m.group("id")[2:].lower()
            cur = _Node(m.group("type"), guid, m.group("desc") or "", num)
            nodes[m.group("id")[0] + guid] = cur
            continue
        if line.startswith("["):
            p = _PORT.match(line)
            if p is None or cur is None:
                errors.append(f"{source}:{num}: unreadable port line: {line[:120]!r}")
                continue
            descs = _QUOTED.findall(p.group("rest"))
            peer_desc = descs[-1] if descs else ""
            cur.ports.append(
                (
                    int(p.group("port")),
                    (p.group("guid") or "").lower() or None,
                    p.group("peer")[0] + p.group("peer")[2:].lower(),
                    int(p.group("pport")),
                    (p.group("pguid") or "").lower() or None,
                    peer_desc,
                )
            )
            continue
        if "=" in line.split()[0]:
            continue  # vendid=, devid=, sysimgguid=, switchguid=, caguid= headers
        errors.append(f"{source}:{num}: unreadable line: {line[:120]!r}")
    topo = _build(nodes, errors, source)
    topo.taken_at = generated_at(text)
    return topo


def _host(desc: str) -> tuple[str, str] | None:
    words = desc.split()
    if not words:
        return None
    return words[0], (words[1] if len(words) > 1 else "")


def _build(nodes: dict[str, _Node], errors: list[str], source: str) -> Topology:
    names = {key: switch_name(n.desc, n.guid) for key, n in nodes.items() if n.type == "Switch"}
    cables: dict[tuple[str, str, str, str], Cable] = {}
    links: dict[str, set[str]] = {name: set() for name in names.values()}
    leaves: set[str] = set()

    def cable(host_desc: str, ca_port: int, ca_guid: str | None, sw: str, sw_port: int) -> None:
        host = _host(host_desc)
        if host is None:
            errors.append(f"{source}: a CA on {sw} port {sw_port} has no node description")
            return
        node, hca = host
        key = (node, hca, sw, str(sw_port))
        if key not in cables:
            cables[key] = Cable(
                node=node,
                host_port=hca or f"port{ca_port}",
                switch=sw,
                switch_port=str(sw_port),
                fabric="ib",
                host_port_num=ca_port,
                host_guid=f"0x{ca_guid}" if ca_guid else None,
            )
        leaves.add(sw)

    for key, n in nodes.items():
        for port, guid, peer, pport, pguid, pdesc in n.ports:
            if n.type == "Switch" and peer.startswith("H"):
                ca = nodes.get(peer)
                cable(ca.desc if ca else pdesc, pport, pguid, names[key], port)
            elif n.type == "Switch" and peer.startswith("S"):
                other = names.get(peer) or switch_name(pdesc, peer[1:])
                links[names[key]].add(other)
                links.setdefault(other, set()).add(names[key])
            elif n.type == "Ca" and peer.startswith("S"):
                sw = names.get(peer) or switch_name(pdesc, peer[1:])
                links.setdefault(sw, set())
                cable(n.desc, port, guid, sw, pport)
    tier: dict[str, int] = dict.fromkeys(leaves, 0)
    frontier = set(leaves)
    for level in (1, 2, 3):
        frontier = {o for sw in frontier for o in links.get(sw, ()) if o not in tier}
        tier.update(dict.fromkeys(frontier, level))
    guid_of = {names[k]: nodes[k].guid for k in names}
    desc_of = {names[k]: nodes[k].desc for k in names}
    switches: dict[str, Switch] = {}
    for sw in links:
        up = sorted(o for o in links[sw] if sw in tier and tier.get(o) == tier[sw] + 1)
        switches[sw] = Switch(
            name=sw,
            tier=tier.get(sw),
            parent=up[0] if len(up) == 1 else None,
            uplinks=up,
            guid=f"0x{guid_of[sw]}" if sw in guid_of else None,
            description=desc_of.get(sw) or None,
        )
    return Topology(
        sources=[source], switches=switches, cables=list(cables.values()), errors=errors
    )

"""`lldpctl -f json` (and `-f json0`) on one host: the switch and switch port at the far
end of each of its interfaces (RoCE / Ethernet).

lldpd collapses single-element containers: one interface is `{"interface": {"eth0": {...}}}`,
several are a list of one-key objects `[{"ens1f0np0": {...}}, ...]`; `-f json0` never
collapses (every value a list, the interface name in `name`). The chassis object is keyed
by the neighbour's SysName, the switch; `port.id` of type `ifname` is the switch port
(`swp1`, `Ethernet8`). The file does not name its host: the caller passes `node` (the
file's stem in a case's `topology/lldp/<node>.json`). Format facts: TOPOLOGY-FACTS.md s5.
"""

from __future__ import annotations

import json
from typing import Any

from attribution_dagster.core.topology import Cable, Switch, Topology

_CHASSIS_FIELDS = {"id", "name", "descr", "mgmt-ip", "capability", "ttl", "mgmt-iface"}


def read_lldp_json(text: str, node: str, source: str = "lldp.json") -> Topology:
    """One host's `lldpctl -f json|json0` output -> its cables (fabric `ethernet`)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Topology(sources=[source], errors=[f"{source}: not JSON: {exc}"])
    lldp = data.get("lldp") if isinstance(data, dict) else None
    if isinstance(lldp, list):  # json0: [{"interface": [...]}]
        lldp = lldp[0] if lldp and isinstance(lldp[0], dict) else {}
    if not isinstance(lldp, dict):
        return Topology(sources=[source], errors=[f"{source}: no 'lldp' object"])
    cables: list[Cable] = []
    switches: dict[str, Switch] = {}
    errors: list[str] = []
    for ifname, body in _interfaces(lldp.get("interface")):
        switch = _chassis_name(body.get("chassis"))
        port = _port_name(body.get("port"))
        if not ifname or not switch or not port:
            errors.append(
                f"{source}: interface {ifname or '?'}: no "
                + ("switch name" if not switch else "port" if not port else "interface name")
            )
            continue
        switches.setdefault(switch, Switch(name=switch, tier=0))
        cables.append(
            Cable(node=node, host_port=ifname, switch=switch, switch_port=port, fabric="ethernet")
        )
    return Topology(sources=[source], switches=switches, cables=cables, errors=errors)


def _interfaces(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, body) of every interface, whatever the collapsing."""
    items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    out: list[tuple[str, dict[str, Any]]] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("name"), str) and ("chassis" in item or "port" in item):
            out.append((item["name"], item))  # json0
            continue
        out.extend((k, v) for k, v in item.items() if isinstance(v, dict))
    return out


def _value(v: Any) -> str | None:
    """A json0 `[{"value": "x"}]`, a `{"value": "x"}` or a plain string -> `x`."""
    if isinstance(v, list):
        v = v[0] if v else None
    if isinstance(v, dict):
        v = v.get("value")
    return v.strip() if isinstance(v, str) and v.strip() else None


def _chassis_name(chassis: Any) -> str | None:
    if isinstance(chassis, list):  # json0
        chassis = chassis[0] if chassis and isinstance(chassis[0], dict) else {}
    if not isinstance(chassis, dict):
        return None
    if "name" in chassis:
        return _value(chassis["name"])
    keyed = [k for k, v in chassis.items() if isinstance(v, dict) and k not in _CHASSIS_FIELDS]
    if len(keyed) == 1:
        return keyed[0]  # {"<SysName>": {...}}
    return _value(chassis.get("id"))  # no SysName sent: the chassis id


def _port_name(port: Any) -> str | None:
    if isinstance(port, list):
        port = port[0] if port and isinstance(port[0], dict) else {}
    if not isinstance(port, dict):
        return None
    pid = port.get("id")
    if isinstance(pid, list):
        pid = pid[0] if pid and isinstance(pid[0], dict) else {}
    if isinstance(pid, dict) and pid.get("type") in ("ifname", "local"):
        return _value(pid)
    return _value(port.get("descr")) or _value(pid)

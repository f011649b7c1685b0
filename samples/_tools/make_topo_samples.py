#!/usr/bin/env python3
"""Regenerate the topology samples (issue 23): samples/topo-* (deterministic).

    python samples/_tools/make_topo_samples.py            # all topo-* cases
    python samples/_tools/make_topo_samples.py topo-leaf  # some

Each case carries the cluster's topology in the forms its tools write (topology/
ibnetdiscover.txt, topology.conf, lldp/<node>.json, nodes.json; formats from
reference/TOPOLOGY-FACTS.md) and, where the fabric saw the fault, the subnet manager's, UFM's
or a switch's own log under a cluster-level logs/<switch-or-tool>/ directory. expected.json
adds `fault_domain` ({level, name, nodes, ports}; null for the non-network fault).
"""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

from logkit import HCAS, PCI, Case, kern, t_, xid  # noqa: E402
from make_samples import (  # noqa: E402
    ROOT,
    S,
    app_head,
    ctx,
    exp,
    ip,
    kernel_file,
    rankpid,
    remote_error,
    torchrun_failed,
    wd_all,
)

CASES = {}


def case(fn):
    CASES[fn.__name__.replace("_", "-")] = fn
    return fn


def nodes_of(n: int) -> list[str]:
    return [f"gpu-{i:03d}" for i in range(1, n + 1)]


def fd(level, name, nodes, ports=None):
    return {"level": level, "name": name, "nodes": sorted(nodes),
            "ports": [dict(zip(("node", "host_port", "switch", "switch_port"), p, strict=True))
                      for p in (ports or [])]}


# ---- topology files -------------------------------------------------------------------
def guid(kind: int, a: int, b: int = 0) -> str:
    return f"{0xb8599f0300000000 + (kind << 20) + (a << 8) + b:016x}"


def ibnetdiscover(switches: dict[str, list[tuple[int, str, str]]], uplinks=None, when="Thu Oct  1 06:00:02 2026"):
    """`ibnetdiscover` text: switches {name: [(port, host, hca)]}, uplinks {leaf: [(port, spine, spine_port)]}."""
    uplinks = uplinks or {}
    sw_guid = {name: guid(1, i + 1) for i, name in enumerate(sorted(set(switches) | {s for v in uplinks.values() for _, s, _ in v}))}
    hosts = {}
    for name, ports in switches.items():
        for port, host, hca in ports:
            hosts[(host, hca)] = (name, port)
    hosts_sorted = sorted(hosts)
    ca_guid = {k: guid(2, int(k[0][-3:]), int(k[1].split("_")[1])) for k in hosts_sorted}
    lid = {k: 100 + i for i, k in enumerate(hosts_sorted)}
    sw_lid = {name: 2 + i for i, name in enumerate(sorted(sw_guid))}
    out = ["#", f"# Topology file: generated on {when}", "#",
           f"# Initiated from node {guid(9, 1)} port {guid(9, 1, 1)}", ""]
    down = {}
    for leaf, links in uplinks.items():
        for port, spine, sport in links:
            down.setdefault(spine, []).append((sport, leaf, port))
    for name in sorted(sw_guid):
        g = sw_guid[name]
        out += ["vendid=0x2c9", "devid=0xd2f0", f"sysimgguid=0x{g}", f"switchguid=0x{g}({g})",
                f'Switch\t65 "S-{g}"\t\t# "MF0;{name}:MQM9700/U1" enhanced port 0 lid {sw_lid[name]} lmc 0']
        rows = []
        for port, host, hca in switches.get(name, []):
            cg = ca_guid[(host, hca)]
            pg = f"{int(cg, 16) + 1:016x}"
            rows.append((port, f'[{port}]\t"H-{cg}"[1]({pg}) \t\t# "{host} {hca}" lid {lid[(host, hca)]} 4xNDR'))
        for port, spine, sport in uplinks.get(name, []):
            rows.append((port, f'[{port}]\t"S-{sw_guid[spine]}"[{sport}]\t\t# "MF0;{spine}:MQM9700/U1" '
                               f"lid {sw_lid[spine]} 4xNDR"))
        for sport, leaf, port in down.get(name, []):
            rows.append((sport, f'[{sport}]\t"S-{sw_guid[leaf]}"[{port}]\t\t# "MF0;{leaf}:MQM9700/U1" '
                                f"lid {sw_lid[leaf]} 4xNDR"))
        out += [r for _, r in sorted(rows)] + [""]
    for host, hca in hosts_sorted:
        cg = ca_guid[(host, hca)]
        pg = f"{int(cg, 16) + 1:016x}"
        sw, port = hosts[(host, hca)]
        out += ["vendid=0x2c9", "devid=0x1021", f"sysimgguid=0x{cg}", f"caguid=0x{cg}",
                f'Ca\t1 "H-{cg}"\t\t# "{host} {hca}"',
                f'[1]({pg}) \t"S-{sw_guid[sw]}"[{port}]\t\t# lid {lid[(host, hca)]} lmc 0 "MF0;{sw}:MQM9700/U1" '
                f"lid {sw_lid[sw]} 4xNDR", ""]
    return out, sw_guid, {k: f"{int(v, 16) + 1:016x}" for k, v in ca_guid.items()}


def rails(nodes: list[str], first_leaf: int, port0: int = 1) -> dict[str, list[tuple[int, str, str]]]:
    """Rail-optimized: rail k (HCAS[k]) of every node goes to leaf ib-leaf-(first_leaf+k)."""
    out = {}
    for k, (_, _, hca) in enumerate(HCAS):
        out[f"ib-leaf-{first_leaf + k:02d}"] = [(port0 + 2 * i, h, hca) for i, h in enumerate(nodes)]
    return out


def lldp(iface_to: dict[str, tuple[str, str]]) -> str:
    """`lldpctl -f json` of one host: several interfaces, so `interface` is a list."""
    items = []
    for iface, (switch, port) in iface_to.items():
        items.append({iface: {
            "via": "LLDP", "rid": "1", "age": "12 days, 03:11:40",
            "chassis": {switch: {"id": {"type": "mac", "value": "1c:34:da:5e:7a:00"},
                                 "descr": "Cumulus Linux version 5.9.1 running on Nvidia SN5600",
                                 "mgmt-ip": "10.200.0.13",
                                 "capability": [{"type": "Bridge", "enabled": True},
                                                {"type": "Router", "enabled": True}]}},
            "port": {"id": {"type": "ifname", "value": port}, "descr": port, "ttl": "120"}}})
    return json.dumps({"lldp": {"interface": items}}, indent=2)


def opensm(t, fn: str, msg: str, us: int = 0) -> tuple:
    return t, f"{t:%b} {t.day:2d} {t:%H:%M:%S} {(t.microsecond + us) % 1000000:06d} [7A1FF640] 0x02 -> {fn}: {msg}"


def failed_app(c, h, i, nnodes, gpus, t_fault, peer, status=12, dev=3, before=()):
    app, _, _ = app_head(c, h, i, nnodes, gpus, "H100", t_fault, dt=3.9, every=10)
    app += list(before)
    p = rankpid(c, h, dev)
    tf = t_fault + timedelta(seconds=c.rng.uniform(18, 24))
    app += remote_error(h, p, dev, i * gpus + dev, tf, ip(peer), status=status, vendor=129)
    app += ["terminate called after throwing an instance of 'c10::DistBackendError'"]
    app += torchrun_failed(c, tf + 1.2 * S, h, [{"rank": i * gpus + dev, "local_rank": dev, "exitcode": -6,
                                                "pid": p}])
    return app


# ---- the cases ------------------------------------------------------------------------
@case
def topo_link_ib():
    return _link_ib("topo-link-ib", "83011", "2026-10-19", nodes_of(4))


@case
def topo_link_ib_again():
    """The same cable a week later, in another job (gpu-003..006): the weekly report's
    across-weeks table marks ib-leaf-07 port 5 a cable or transceiver suspect."""
    return _link_ib("topo-link-ib-again", "83544", "2026-10-27", [f"gpu-{i:03d}" for i in (3, 4, 5, 6)])


def _link_ib(name: str, job_id: str, day: str, nodes: list[str]) -> Case:
    c = Case(name,
             ctx(job_id, "FAILED", f"{day}T09:00:00Z", f"{day}T09:42:10Z", nodes, "H100",
                 cluster="ib-ndr-dfw1"),
             exp("attributed", "network.fabric", ["gpu-003"], ["ib_link_down"],
                 why="gpu-003's rail-6 HCA (mlx5_10) lost its link: NCCL's async port error on the host and "
                     "OpenSM's port-state change on ib-leaf-07 port 5 name the two ends of one cable; the "
                     "peers' retry-exceeded errors follow."))
    c.expected["fault_domain"] = fd("link", "ib-leaf-07", ["gpu-003"],
                                    [("gpu-003", "mlx5_10", "ib-leaf-07", "5")])
    T0 = t_(f"{day}T09:31:44.210000Z")
    sw = rails(nodes_of(4) + ["gpu-005", "gpu-006"], 1)  # the fabric: the same cables every week
    text, sw_guid, _ = ibnetdiscover(sw)
    c.add("topology/ibnetdiscover.txt", text)
    for i, h in enumerate(nodes):
        p = rankpid(c, h, 6)
        before = [f"{h}:{p}:{p + 150} [6] NCCL WARN NET/IB : mlx5_10:1 Got async event : port error"]
        app = failed_app(c, h, i, 4, 8, T0, (i + 2) % 4 if i else 2,
                         before=before if h == "gpu-003" else ())
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 12))
    g = sw_guid["ib-leaf-07"]
    c.add("logs/opensm/opensm.log", [
        opensm(T0 - 40 * S, "osm_ucast_mgr_process", "ucast_mgr_process: routing engine 'updn' done")[1],
        opensm(T0 + timedelta(milliseconds=3), "log_trap_info",
               "Received Generic Notice type:1 num:128 (Link state change) Producer:2 (Switch) from LID:8 "
               "TID:0x0000000000000000")[1],
        opensm(T0 + timedelta(milliseconds=9), "osm_pi_rcv_process",
               f"Switch 0x{g} MF0;ib-leaf-07:MQM9700/U1 port 5 changed state from ACTIVE to DOWN")[1],
        opensm(T0 + timedelta(milliseconds=15), "do_sweep",
               "Entering heavy sweep with flags: force_heavy_sweep 1, coming out of standby 0, subnet "
               "initialization error 0, sm port change 0")[1],
    ])
    return c


@case
def topo_link_roce():
    nodes = nodes_of(4)
    c = Case("topo-link-roce",
             ctx("83102", "FAILED", "2026-10-20T02:00:00Z", "2026-10-20T02:35:30Z", nodes, "H100",
                 cluster="roce-sjc2"),
             exp("attributed", "network.fabric", ["gpu-002"], ["ib_link_down"],
                 why="gpu-002's RoCE port ens1f1np1 went down; its LLDP neighbour is roce-leaf-02 swp3, whose "
                     "switchd took the same port down in the same second; the other nodes only see retries."))
    c.expected["fault_domain"] = fd("link", "roce-leaf-02", ["gpu-002"],
                                    [("gpu-002", "ens1f1np1", "roce-leaf-02", "swp3")])
    T0 = t_("2026-10-20T02:24:05.730000Z")
    for i, h in enumerate(nodes):
        c.add(f"topology/lldp/{h}.json", lldp({"ens1f0np0": ("roce-leaf-01", f"swp{1 + 2 * i}"),
                                               "ens1f1np1": ("roce-leaf-02", f"swp{1 + 2 * i}")}).splitlines())
        app = failed_app(c, h, i, 4, 8, T0, (i + 1) % 4 if h != "gpu-001" else 1)
        ev = []
        if h == "gpu-002":
            ev = [kern(c, "iso", T0, h, "mlx5_core 0000:1b:00.1 ens1f1np1: Link down")]
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 12))
    ts = T0 + timedelta(milliseconds=41)
    c.add("logs/roce-leaf-02/syslog", [
        f"{(T0 - 300 * S).isoformat(timespec='microseconds')} roce-leaf-02 sysmonitor: Critical: ok",
        f"{ts.isoformat(timespec='microseconds')} roce-leaf-02 switchd[2877]: sync_base.c:604 swp3: ifindex 7, "
        "oper down",
        f"{(ts + timedelta(milliseconds=66)).isoformat(timespec='microseconds')} roce-leaf-02 switchd[2877]: "
        "nic.c:223 nic_set_carrier: swp3: setting kernel carrier: down",
    ])
    return c


@case
def topo_link_switch_side_only():
    nodes = nodes_of(4)
    c = Case("topo-link-switch-side-only",
             ctx("83240", "FAILED", "2026-10-21T11:00:00Z", "2026-10-21T11:29:12Z", nodes, "H100",
                 cluster="ib-ndr-ord3"),
             exp("attributed", "network.fabric", ["gpu-002"], ["ib_link_down"],
                 why="Only UFM saw it: event 329 `Link went down` between ib-leaf-02 port 3 and gpu-002's HCA "
                     "(identified by its port GUID in the fabric's ibnetdiscover); gpu-002's own kernel log says "
                     "nothing, the peers' NCCL retries follow."))
    c.expected["fault_domain"] = fd("link", "ib-leaf-02", ["gpu-002"],
                                    [("gpu-002", "mlx5_3", "ib-leaf-02", "3")])
    T0 = t_("2026-10-21T11:18:31.455000Z")
    sw = rails(nodes, 1)
    text, sw_guid, ports = ibnetdiscover(sw)
    c.add("topology/ibnetdiscover.txt", text)
    for i, h in enumerate(nodes):
        app = failed_app(c, h, i, 4, 8, T0, (i + 1) % 4 if h != "gpu-001" else 1)
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 12))
    g, hg = sw_guid["ib-leaf-02"], ports[("gpu-002", "mlx5_3")]
    stamp = lambda t: f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"  # noqa: E731
    c.add("logs/ufm/event.log", [
        f"{stamp(T0 - 3600 * S)} [881230] [517] INFO [Fabric_Topology] Site [default]: Fabric health report: "
        "0 errors, 2 warnings",
        f"{stamp(T0 + timedelta(milliseconds=120))} [881301] [329] WARNING [Fabric_Topology] Link [Source {g}_3  TO "
        f"Dest: {hg}_1]: Link went down: {g} (Switch: ib-leaf-02) : 3 - {hg} (Computer: gpu-002 HCA-1) : 1",
    ])
    return c


@case
def topo_leaf():
    nodes = nodes_of(4)
    c = Case("topo-leaf",
             ctx("83377", "FAILED", "2026-10-22T18:00:00Z", "2026-10-22T18:24:51Z", nodes, "H100",
                 cluster="ib-ndr-dfw2"),
             exp("attributed", "network.fabric", [], ["ib_link_down"],
                 why="Rail 6 (mlx5_10) went down on all four nodes in the same second, and every job cable on "
                     "that rail ends on ib-leaf-07: OpenSM reports its ports 1, 3, 5, 7 down. The leaf, not a "
                     "node or a cable."))
    c.expected["fault_domain"] = fd("leaf", "ib-leaf-07", nodes,
                                    [(h, "mlx5_10", "ib-leaf-07", str(1 + 2 * i)) for i, h in enumerate(nodes)])
    T0 = t_("2026-10-22T18:13:09.120000Z")
    sw = rails(nodes, 1)
    text, sw_guid, _ = ibnetdiscover(sw)
    c.add("topology/ibnetdiscover.txt", text)
    pci, dev_name, hca = HCAS[6]
    for i, h in enumerate(nodes):
        p = rankpid(c, h, 6)
        app = failed_app(c, h, i, 4, 8, T0, (i + 1) % 4,
                         before=[f"{h}:{p}:{p + 150} [6] NCCL WARN NET/IB : {hca}:1 Got async event : port error"])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 12))
    g = sw_guid["ib-leaf-07"]
    c.add("logs/opensm/opensm.log", [
        opensm(T0 + timedelta(milliseconds=4 + 3 * i), "osm_pi_rcv_process",
               f"Switch 0x{g} MF0;ib-leaf-07:MQM9700/U1 port {1 + 2 * i} changed state from ACTIVE to DOWN")[1]
        for i in range(4)])
    return c


@case
def topo_spine():
    nodes = nodes_of(8)
    c = Case("topo-spine",
             ctx("83415", "FAILED", "2026-10-23T06:00:00Z", "2026-10-23T06:31:02Z", nodes, "H100",
                 cluster="ib-hdr-lab4"),
             exp("attributed", "network.fabric", [], ["ib_completion_error"],
                 why="No host port went down: every node's NCCL traffic to the other leaf's nodes hit "
                     "retry-exceeded at once, while OpenSM and UFM report the uplinks of ib-leaf-07 and ib-leaf-08 "
                     "to ib-spine-02 down: the spine above both leaves."))
    c.expected["fault_domain"] = fd("spine", "ib-spine-02", nodes)
    T0 = t_("2026-10-23T06:20:47.800000Z")
    c.add("topology/topology.conf", [
        "# generated by slurmibtopology.sh from ibnetdiscover, 2026-10-01",
        "SwitchName=ib-leaf-07 Nodes=gpu-[001-004]",
        "SwitchName=ib-leaf-08 Nodes=gpu-[005-008]",
        "SwitchName=ib-spine-02 Switches=ib-leaf-[07-08]",
    ])
    for i, h in enumerate(nodes):
        peer = (i + 4) % 8  # the node's peer sits under the other leaf
        app, _, _ = app_head(c, h, i, 8, 8, "H100", T0, dt=3.9, every=10)
        p = rankpid(c, h, 2)
        tf = T0 + timedelta(seconds=c.rng.uniform(20, 23))
        app += remote_error(h, p, 2, i * 8 + 2, tf, ip(peer), status=12, vendor=129)
        app += torchrun_failed(c, tf + 1.2 * S, h, [{"rank": i * 8 + 2, "local_rank": 2, "exitcode": -6, "pid": p}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", [], 10))
    lines = []
    for k, leaf in enumerate(("ib-leaf-07", "ib-leaf-08")):
        g = guid(1, 7 + k)
        for j, port in enumerate((63, 64)):
            lines.append(opensm(T0 + timedelta(milliseconds=5 + 4 * (2 * k + j)), "osm_pi_rcv_process",
                                f"Switch 0x{g} MF0;{leaf}:QM8700/U1 port {port} changed state from ACTIVE to DOWN")[1])
    c.add("logs/opensm/opensm.log", lines)
    stamp = lambda t: f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"  # noqa: E731
    sg = guid(1, 2)
    c.add("logs/ufm/event.log", [
        f"{stamp(T0 + timedelta(milliseconds=300 + k))} [77120{k}] [329] WARNING [Hardware] Link [Source "
        f"{guid(1, 7 + k)}_63 TO Dest: {sg}_{7 + k}]: Link went down: (Switch:{leaf}:1/32/1){guid(1, 7 + k)}:63 - "
        f"(Switch:ib-spine-02:1/4/{1 + k}){sg}:{7 + k}, cable S/N: MT2330FT0{9118 + k}"
        for k, leaf in enumerate(("ib-leaf-07", "ib-leaf-08"))])
    return c


@case
def topo_nvlink_domain():
    nodes = nodes_of(4)
    domain = "50000000-0000-0000-0000-000000000005.4000000004"
    c = Case("topo-nvlink-domain",
             ctx("83520", "FAILED", "2026-10-26T13:00:00Z", "2026-10-26T13:26:40Z", nodes, "GB200",
                 cluster="gb200-nvl72-west"),
             exp("attributed", "gpu.nvlink", ["gpu-001", "gpu-002", "gpu-003"], ["xid"],
                 why="Fatal XID 149 NETIR_LINK_EVT on three trays of one NVL72 rack within a second, and the "
                     "rack's Fabric Manager reports a GPU NVL fatal error: the NVLink domain, not one GPU."))
    # no ports: NVLink runs through the trays' NVSwitches, not through cables a topology lists
    c.expected["fault_domain"] = fd("nvlink_domain", domain, ["gpu-001", "gpu-002", "gpu-003"])
    T0 = t_("2026-10-26T13:15:02.311000Z")
    items = []
    for i, h in enumerate(nodes + ["gpu-005"]):
        labels = {"kubernetes.io/hostname": h,
                  "network.topology.nvidia.com/accelerator": domain if h != "gpu-005" else
                  "50000000-0000-0000-0000-000000000005.4000000005",
                  "network.topology.nvidia.com/leaf": "ib-leaf-03", "network.topology.nvidia.com/spine": "ib-spine-01",
                  "nvidia.com/gpu.clique": domain}
        items.append({"apiVersion": "v1", "kind": "Node",
                      "metadata": {"name": h, "labels": labels, "uid": f"7c1d2e0{i}-5a4b-4c3d-9e8f-0a1b2c3d4e5f",
                                   "creationTimestamp": "2026-09-30T08:12:44Z"},
                      "status": {"addresses": [{"type": "InternalIP", "address": f"10.60.3.{11 + i}"},
                                               {"type": "Hostname", "address": h}]}})
    c.add("topology/nodes.json", json.dumps({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                                             "items": items}, indent=2).splitlines())
    gpus, seq = 4, 20441
    for i, h in enumerate(nodes):
        app, _, _ = app_head(c, h, i, 4, gpus, "GB200", T0, dt=2.1, every=10)
        ev = []
        if h != "gpu-004":
            pci = PCI["GB200"][i]
            ev = [kern(c, "iso", T0 + timedelta(milliseconds=37 * i), h,
                       xid(pci, 149, "NETIR_LINK_EVT  Fatal   XC0 i0 Link 05 (0x021425c6 0x00000000 0x00000000 "
                                     "0x00000000 0x00000000 0x00000000)", pid=None))]
        tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
        app += wd_all(c, h, i, gpus, tw, seq, full_ranks=(0,), optype="_ALLGATHER_BASE", numel=52428800)
        app += torchrun_failed(c, tw + 1.6 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                    "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/kern.log", kernel_file(c, h, "iso", ev, 20, "GB200"))
    tf = T0 + timedelta(milliseconds=420)
    c.add("logs/nvl72-r07-fabricmanager/fabricmanager.log", [
        f"[{T0 - 7200 * S:%b %d %Y %H:%M:%S}] [INFO] [tid 202] Fabric Manager successfully started partition 4137",
        f"[{tf:%b %d %Y %H:%M:%S}] [ERROR] [tid 202] Fabric Manager detected GPU NVL Fatal error on :",
        "moduleId : 3", "nodeId : 7", "partitionId : 4137", "gpuGuid : 0xED0A8727AFC3C6F9", "portNum : 5",
        "portStatus : 1", "errorCode : 0x06", "errorSubcode : 0x0E", "portDownReasonCode : 0x0A",
        "isErrorFirst : 0", "errorStatus : 0x00000000",
    ])
    return c


@case
def topo_non_network_fault():
    nodes = nodes_of(4)
    c = Case("topo-non-network-fault",
             ctx("83611", "FAILED", "2026-10-27T20:00:00Z", "2026-10-27T20:33:45Z", nodes, "H100",
                 cluster="ib-ndr-dfw3"),
             exp("attributed", "gpu.lost", ["gpu-002"], ["xid"],
                 why="XID 79 on gpu-002 GPU 4: a GPU fault, not a network one, so no fault domain although the "
                     "topology is known; UFM's link-down for gpu-007 (not in this job) is context only."))
    c.expected["fault_domain"] = None
    T0 = t_("2026-10-27T20:21:17.905000Z")
    sw = rails(nodes_of(8), 1)
    text, sw_guid, ports = ibnetdiscover(sw)
    c.add("topology/ibnetdiscover.txt", text)
    gpus, seq = 8, 30112
    for i, h in enumerate(nodes):
        app, _, _ = app_head(c, h, i, 4, gpus, "H100", T0, dt=3.9, every=10)
        ev = []
        if h == "gpu-002":
            ev = [kern(c, "rfc3164", T0, h, xid(PCI["H100"][4], 79, "GPU has fallen off the bus."))]
        tw = T0 + timedelta(seconds=600, milliseconds=c.rng.randint(40, 300))
        app += wd_all(c, h, i, gpus, tw, seq, skip=(4,) if h == "gpu-002" else ())
        app += torchrun_failed(c, tw + 1.4 * S, h, [{"rank": i * gpus, "local_rank": 0, "exitcode": -6,
                                                    "pid": rankpid(c, h, 0)}])
        c.add(f"logs/{h}/app.log", app)
        c.add(f"logs/{h}/syslog", kernel_file(c, h, "rfc3164", ev, 12))
    g, hg = sw_guid["ib-leaf-03"], ports[("gpu-007", "mlx5_4")]
    stamp = lambda t: f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond // 1000:03d}"  # noqa: E731
    c.add("logs/ufm/event.log", [
        f"{stamp(T0 - 240 * S)} [990114] [329] WARNING [Fabric_Topology] Link [Source {g}_13  TO Dest: {hg}_1]: "
        f"Link went down: {g} (Switch: ib-leaf-03) : 13 - {hg} (Computer: gpu-007 HCA-1) : 1",
    ])
    return c


def main(argv: list[str]) -> int:
    for n in argv or list(CASES):
        d = CASES[n]().write(ROOT)
        size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        print(f"{n:36s} {size / 1024:8.1f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

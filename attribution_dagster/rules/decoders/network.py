"""Network and bus decoders: InfiniBand completion status names, PCIe AER severity, the
switch and host ends that switch-side lines (OpenSM, UFM) name."""

from __future__ import annotations

import re

from attribution_dagster.rules.decoders.registry import Draft, decoder

IBV_WC_STATUS = {
    0: "success",
    1: "loc_len",
    2: "loc_qp_op",
    3: "loc_eec_op",
    4: "loc_prot",
    5: "wr_flush",
    6: "mw_bind",
    7: "bad_resp",
    8: "loc_access",
    9: "rem_inv_req",
    10: "rem_access",
    11: "rem_op",
    12: "retry_exceeded",
    13: "rnr_retry",
    14: "loc_rdd_viol",
    15: "rem_inv_rd_req",
    16: "rem_abort",
    17: "inv_eecn",
    18: "inv_eec_state",
    19: "fatal",
    20: "resp_timeout",
    21: "general",
}


@decoder("ib_status", attrs=["status_name"])
def decode_ib_status(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    status = draft["attrs"].get("status")
    if isinstance(status, int):
        draft["attrs"]["status_name"] = IBV_WC_STATUS.get(status, "unknown")
    return True


@decoder("aer", attrs=["severity"])
def decode_aer(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Severity; `Non-Fatal` is tested before `Fatal` because it contains it."""
    sev = (groups.get("sev") or groups.get("sev2") or "").lower()
    if "non-fatal" in sev or "nonfatal" in sev:
        draft["attrs"]["severity"] = "nonfatal"
    elif "fatal" in sev:
        draft["attrs"]["severity"] = "fatal"
    elif sev.startswith("correct"):
        draft["attrs"]["severity"] = "corrected"
    else:
        return False
    return True


# ---------------------------------------------------------------- switch-side lines
_HCA = re.compile(r"^(?:mlx\d_\d{1,3}|HCA-\d{1,3}|ib\w{1,16}|hfi\d_\d{1,3}|bnxt_re\d{1,3})$")
_UFM_LABEL = re.compile(r"^\d{1,2}/(?P<cage>\d{1,3})/(?P<half>\d)$")


def ib_switch_name(desc: str | None) -> str | None:
    """A switch's name from its InfiniBand NodeDescription (spec section 2): the host name of a
    managed switch (`MF0;ib-leaf-02:MQM9700/U1` -> `ib-leaf-02`), else the description."""
    d = (desc or "").strip().strip('"').strip()
    if ";" in d:
        d = d.split(";", 1)[1].split(":", 1)[0]
    return d or None


def ufm_port_number(label: str | None) -> int | None:
    """UFM's `1/17/1` (cage 17, half 1 of an NDR OSFP cage) as the IB port number 33."""
    m = _UFM_LABEL.match((label or "").strip())
    if m is None:
        return None
    return 2 * (int(m["cage"]) - 1) + int(m["half"])


def _host_end(desc: str, guid: str | None, port: str | None, attrs: dict) -> str | None:
    """`gpu-a01 mlx5_0` -> host, host_port (the HCA), host_guid, host_port_num; the host."""
    parts = desc.strip().strip('"').split()
    if not parts:
        return None
    attrs["host"] = parts[0]
    if len(parts) > 1:
        attrs["host_port"] = parts[1]
    if guid:
        attrs["host_guid"] = guid.lower()
    if port and port.isdigit():
        attrs["host_port_num"] = int(port)
    return parts[0]


@decoder(
    "link_ends",
    attrs=[
        "switch",
        "switch_guid",
        "switch_port",
        "peer_switch",
        "peer_switch_guid",
        "peer_switch_port",
        "host",
        "host_port",
        "host_guid",
        "host_port_num",
    ],
)
def decode_link_ends(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """The two ends a switch-side line names (groups a*/b*: type, name, guid, port, UFM label),
    or one (a switch port, a port GUID with its node description): the first switch end is
    `switch`/`switch_port`, a second one `peer_switch`, a host end `host`/`host_port`/
    `host_guid` (draft node_host = the host, so a job node named here is placed directly)."""
    attrs = draft["attrs"]
    host = None
    for end in ("a", "b"):
        # `x2` groups: the same end in a regex's second form (older UFM wording)
        typ = (groups.get(f"{end}t") or groups.get(f"{end}t2") or "").lower()
        name = groups.get(f"{end}n") or groups.get(f"{end}n2")
        guid = groups.get(f"{end}g") or groups.get(f"{end}g2")
        port = groups.get(f"{end}p") or groups.get(f"{end}p2")
        if not typ and not name and not guid:
            continue
        if typ in ("computer", "host", "ca"):
            host = _host_end(name or "", guid, port, attrs) or host
            continue
        # a node description (drop_mgr_remove_port): a host's is `<hostname> <HCA>`
        parts = (name or "").strip().strip('"').split()
        if typ in ("", "node") and len(parts) == 2 and _HCA.match(parts[1]):
            host = _host_end(name or "", guid, port, attrs) or host
            continue
        label = name.split(":", 1)[1] if name and ";" not in name and ":" in name else None
        sw = ib_switch_name(name.split(":", 1)[0] if label else name)
        num = int(port) if port and port.isdigit() else ufm_port_number(label)
        key = "switch" if "switch" not in attrs and "switch_guid" not in attrs else "peer_switch"
        if sw:
            attrs[key] = sw
        if guid:
            attrs[f"{key}_guid"] = guid.lower()
        if num is not None:
            attrs[f"{key}_port"] = str(num)
    if host:
        draft["node_host"] = host
    return bool({"switch", "switch_guid", "host", "host_guid"} & set(attrs))


_FM_FIELD = re.compile(r"^\s*(?P<key>[A-Za-z]{2,32})\s*:\s*(?P<value>\S{1,64})\s*$")
_FM_KEYS = {
    "moduleId": "module",
    "nodeId": "fm_node_id",
    "partitionId": "partition",
    "gpuGuid": "gpu_guid",
    "portNum": "nvl_port",
    "errorCode": "error_code",
    "portDownReasonCode": "port_down_reason",
}


@decoder("fm_nvl_block", attrs=list(_FM_KEYS.values()))
def decode_fm_nvl_block(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Fabric Manager's multi-line `GPU NVL Fatal error on :` block: `key : value` lines after
    the header (moduleId, nodeId, partitionId, gpuGuid, portNum, errorCode ...)."""
    attrs = draft["attrs"]
    for line in text.split("\n")[1:]:
        m = _FM_FIELD.match(line)
        if m is None:
            break
        key = _FM_KEYS.get(m["key"])
        if key is not None:
            v = m["value"]
            attrs[key] = int(v) if v.isdigit() else v
    return True

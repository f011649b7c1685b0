"""GPU decoders: XID and SXid lines, NVLink link numbers, CUDA error names.

The XID table itself is data (rules/xids.yaml, with its source): the decoder reads the
mnemonic and subsystem from it, and what only the line says (fatality, event, link, the
recovery action, the XID a cleanup follows, the GPC of an XID 13).
"""

from __future__ import annotations

import re

from attribution_dagster.rules.decoders.registry import Draft, decoder
from attribution_dagster.rules.vocabulary import vocabulary

# nvmlDeviceGpuRecoveryAction_t, for XID 154 lines that give only the number.
RECOVERY_ACTIONS = {
    0: "None",
    1: "GPU Reset",
    2: "Node Reboot",
    3: "Drain P2P",
    4: "Drain and Reset",
    5: "Recover IMEX Domain",
    6: "Bus Reset",
    7: "System Reboot",
}

_NONFATAL = re.compile(r"\bNon-?[Ff]atal\b|\bnon-?fatal\b|\bNONFATAL\b|\bNON-FATAL\b")
_FATAL = re.compile(r"\b[Ff]atal\b|\bFATAL\b")
_EVENT = re.compile(r"^\s*([A-Z][A-Z0-9]*_[A-Z0-9_]+)\b")
_LINK = re.compile(r"\b[Ll]ink (\d{1,3})\b")
_ACTION = re.compile(r"from 0x([0-9a-fA-F]+)(?: \(([^)]*)\))? to 0x([0-9a-fA-F]+)(?: \(([^)]*)\))?")
_GPC = re.compile(r"\bGPC ?(\d+)")
_TPC = re.compile(r"\bTPC ?(\d+)")
_SM = re.compile(r"\bSM ?(\d+)")
_PID = re.compile(r"\bpid=(\d+)")
_NAME = re.compile(r"\bname=([^,]*)")


def read_fatal(text: str) -> bool | None:
    """`Nonfatal`/`Non-Fatal` first, since both contain `Fatal`; None when the line is silent."""
    if _NONFATAL.search(text):
        return False
    if _FATAL.search(text):
        return True
    return None


def _int(s: str | None, base: int = 10) -> int | None:
    if s is None:
        return None
    try:
        return int(s, base)
    except ValueError:
        return None


def _link(text: str, draft: Draft) -> None:
    m = _LINK.search(text)
    if m:
        link = int(m.group(1))
        draft["attrs"]["link"] = link
        draft["fields"].setdefault("port", f"link {link}")


_CAUSED_BY = re.compile(r"caused by previous Xid (\d{1,4})")


@decoder(
    "xid",
    attrs=[
        "mnemonic",
        "subsystem",
        "fatal",
        "event",
        "link",
        "action",
        "action_code",
        "previous_action",
        "gpc",
        "tpc",
        "sm",
        "detail",
        "contained",
        "pid",
        "process",
        "text",
    ],
)
def decode_xid(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """Mnemonic from the table, and what the line itself says: fatality, event, link, action."""
    code = draft["fields"].get("code")
    if not isinstance(code, int):
        return False
    rest = groups.get("rest") or ""
    entry = vocabulary().xids.get(code)
    mnemonic, subsystem = (entry.mnemonic, entry.subsystem) if entry else ("UNKNOWN", "unknown")
    attrs = draft["attrs"]
    attrs["mnemonic"] = mnemonic
    attrs["subsystem"] = subsystem
    pid, name = _PID.search(rest), _NAME.search(rest)
    if pid:
        attrs["pid"] = int(pid.group(1))
    if name and name.group(1).strip() not in ("<unknown>", ""):
        attrs["process"] = name.group(1).strip()
    # the message after the optional "pid=..., name=...," prefix
    msg = re.sub(r"^\s*pid=[^,]*,\s*(?:name=[^,]*,\s*)?", "", rest)
    attrs["text"] = msg.strip()[:200]
    attrs["fatal"] = read_fatal(msg)
    ev = _EVENT.match(msg)
    if ev:
        attrs["event"] = ev.group(1)
    _link(msg, draft)
    if code == 154:
        m = _ACTION.search(msg)
        if m:
            to_code = int(m.group(3), 16)
            attrs["action_code"] = to_code
            attrs["action"] = (m.group(4) or RECOVERY_ACTIONS.get(to_code, "unknown")).strip()
            prev = int(m.group(1), 16)
            attrs["previous_action"] = (m.group(2) or RECOVERY_ACTIONS.get(prev, "unknown")).strip()
    caused = _CAUSED_BY.search(msg)
    if caused:  # XID 45 `Ch 00000001 caused by previous Xid 149`: the XID it follows
        attrs["previous_xid"] = int(caused.group(1))
    if code == 13:
        for key, rx in (("gpc", _GPC), ("tpc", _TPC), ("sm", _SM)):
            m = rx.search(msg)
            if m:
                attrs[key] = int(m.group(1))
        detail = re.search(r"\):\s*(.+)$", msg)
        if detail:
            attrs["detail"] = detail.group(1).strip()[:120]
    if code in (94, 95):
        attrs["contained"] = code == 94
    return True


@decoder("sxid", attrs=["fatal", "link", "text"])
def decode_sxid(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    rest = groups.get("rest") or ""
    draft["attrs"]["fatal"] = read_fatal(rest)
    draft["attrs"]["text"] = rest.strip()[:200]
    _link(rest, draft)
    return True


@decoder("link", attrs=["link"])
def decode_link(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """NVLink lines outside XIDs: `link 2` -> attrs.link and port."""
    _link(text, draft)
    return True


_CUDA_ERRORS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"illegal memory access|ILLEGAL_ADDRESS|cudaErrorIllegalAddress"),
        "illegal_address",
    ),
    (re.compile(r"misaligned address|MISALIGNED_ADDRESS"), "misaligned_address"),
    (
        re.compile(r"unspecified launch failure|LAUNCH_FAILED|cudaErrorLaunchFailure"),
        "launch_failure",
    ),
    (re.compile(r"device-side assert|ASSERT\b"), "device_assert"),
    (re.compile(r"illegal instruction|ILLEGAL_INSTRUCTION"), "illegal_instruction"),
    (re.compile(r"launch timed out|LAUNCH_TIMEOUT"), "launch_timeout"),
    (re.compile(r"no CUDA-capable device|NO_DEVICE|driver version is insufficient"), "no_device"),
    (
        re.compile(
            r"busy or unavailable|cudaErrorDevicesUnavailable|CUDA_ERROR_DEVICES_UNAVAILABLE"
            r"|\berror=46\b|CUDA error 46\b"
        ),
        "devices_unavailable",
    ),
    (re.compile(r"initialization error|NOT_INITIALIZED"), "init_error"),
    (re.compile(r"\b999\b|unknown error|CUDA_ERROR_UNKNOWN"), "unknown"),
    (re.compile(r"ECC error|ECC_UNCORRECTABLE"), "ecc_uncorrectable"),
    (re.compile(r"NVLink|NVLINK_UNCORRECTABLE"), "nvlink_uncorrectable"),
]


@decoder("cuda_error", attrs=["error", "message"])
def decode_cuda_error(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    msg = groups.get("msg") or text
    for rx, name in _CUDA_ERRORS:
        if rx.search(msg):
            draft["attrs"]["error"] = name
            break
    else:
        draft["attrs"]["error"] = "other"
    draft["attrs"]["message"] = msg.strip()[:200]
    return True

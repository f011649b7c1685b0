"""Network and bus decoders: InfiniBand completion status names, PCIe AER severity."""

from __future__ import annotations

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

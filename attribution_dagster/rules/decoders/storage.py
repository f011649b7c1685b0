"""Storage decoders: which I/O failure a kernel or filesystem line reports."""

from __future__ import annotations

from attribution_dagster.rules.decoders.registry import Draft, decoder

_IO_WHAT = {
    "d1": "buffer_io",
    "d2": "block_io",
    "d3": "ext4_error",
    "d4": "remount_ro",
    "d5": "nvme_reset",
    "d6": "xfs_error",
    "d7": "offline_device",
    "ro": "remount_ro",
    "eio": "eio",
    "esh": "transport_shutdown",
    "xfs": "xfs_shutdown",
}


@decoder("io_error", attrs=["what", "device"])
def decode_io_error(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """attrs.what says which I/O failure the line reports; attrs.device where named."""
    for group, what in _IO_WHAT.items():
        val = groups.get(group)
        if val:
            draft["attrs"]["what"] = what
            if group.startswith("d"):
                # an offline SCSI disk: its block name (`[sdc]`) when given, else H:C:T:L
                draft["attrs"]["device"] = (groups.get("d8") or val) if group == "d7" else val
            return True
    return False

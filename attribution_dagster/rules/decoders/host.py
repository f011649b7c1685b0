"""Host decoders: what the kernel (or a driver probe) says happened."""

from __future__ import annotations

from attribution_dagster.rules.decoders.registry import Draft, decoder

_KERNEL_WHAT = [
    ("Kernel panic", "panic"),
    ("soft lockup", "soft_lockup"),
    ("hard LOCKUP", "hard_lockup"),
    ("blocked for more than", "hung_task"),
    ("Machine check events logged", "mce"),
    ("[Hardware Error]", "mce"),
    ("critical temperature reached", "thermal_shutdown"),
]


@decoder("kernel_what", attrs=["what"])
def decode_kernel_what(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    for needle, what in _KERNEL_WHAT:
        if needle in text:
            draft["attrs"]["what"] = what
            return True
    return False


@decoder("what", attrs=["what"])
def decode_what(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """attrs.what = the name (without `w_`) of the first `w_*` group that matched, so one
    regex with alternatives says which of them it saw (`(?P<w_driver_not_loaded>...)`)."""
    for name, value in groups.items():
        if value is not None and name.startswith("w_"):
            draft["attrs"]["what"] = name[2:]
            break
    return True

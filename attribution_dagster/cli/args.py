"""Argument types and options every `attribution` command shares: one line and exit 2 for a
bad value (argparse), never a validation dump."""

from __future__ import annotations

import argparse
from pathlib import Path


def seconds(text: str) -> float:
    """An argparse type: a finite number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (a number), got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number, 1 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def add_config_arg(p: argparse.ArgumentParser) -> None:
    """`--config FILE`, accepted before the command and after it by every subcommand
    (SUPPRESS: a subcommand without it keeps the value given before the command)."""
    p.add_argument("--config", type=Path, metavar="FILE", default=argparse.SUPPRESS,
                   help="attribution.yaml with the clusters (default: $ATTRIBUTION_CONFIG, "
                   "else ./attribution.yaml); also accepted before the command")

"""The `attribution` command, one module per command family."""

from attribution_dagster.cli.app import main

__all__ = ["main"]

"""Decoders by domain (gpu, network, host, storage, application, launcher, scheduler), and the
line prefixes parsers match after. Importing the package registers every decoder."""

from attribution_dagster.rules.decoders import (  # noqa: F401 - imported to register
    application,
    gpu,
    host,
    launcher,
    network,
    scheduler,
    storage,
)
from attribution_dagster.rules.decoders.prefixes import json_message, strip_prefix
from attribution_dagster.rules.decoders.registry import DECODER_ATTRS, DECODERS

__all__ = ["DECODERS", "DECODER_ATTRS", "json_message", "strip_prefix"]

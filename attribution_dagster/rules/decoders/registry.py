"""The decoder registry: the few things a regex cannot say, registered by name for parsers.yaml.

A decoder gets the regex groups, the text it matched and a mutable draft
(`fields`, `attrs`, optional `node_host`, `excerpt`). It fills in what needs code (code tables,
reading `Fatal` vs `Nonfatal`, exception families) and returns False to veto the match.
Decoders must never raise on odd input: the catalog wraps them anyway, but they are written
to treat every group as optional. Each registers the attrs it may set, for docs/parsers.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Draft = dict[str, Any]
Decoder = Callable[[dict[str, str | None], str, Draft], bool]

DECODERS: dict[str, Decoder] = {}
DECODER_ATTRS: dict[str, list[str]] = {}  # attrs each decoder may set (docs/parsers.md)


def decoder(name: str, attrs: list[str]) -> Callable[[Decoder], Decoder]:
    """Register `fn` as the decoder parsers.yaml names `name`; `attrs` are those it may set."""

    def register(fn: Decoder) -> Decoder:
        DECODERS[name] = fn
        DECODER_ATTRS[name] = list(attrs)
        return fn

    return register

"""YAML read the fast way: libyaml's safe loader where PyYAML was built with it.

The catalogs (parsers, rules, kinds, categories, XIDs) are read on every `attribution
analyze`; the pure-Python loader spends a good part of a small job's run on them. PyYAML is
imported on first use: a run whose catalogs come from the start-up cache
(core/formats/startcache.py) and that reads no other YAML never imports it.
"""

from __future__ import annotations

from typing import Any


def safe_load(text: str | bytes) -> Any:
    """`yaml.safe_load`, with libyaml when available (same results: a safe loader)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a SafeLoader, C or Python


def __getattr__(name: str) -> Any:
    """`YAMLError` (yaml.YAMLError), imported when an `except` clause first asks for it."""
    if name == "YAMLError":
        import yaml

        return yaml.YAMLError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

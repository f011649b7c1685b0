"""YAML read the fast way: libyaml's safe loader where PyYAML was built with it.

The catalogs (parsers, rules, kinds, categories, XIDs) are read on every `attribution
analyze`; the pure-Python loader spends a good part of a small job's run on them.
"""

from __future__ import annotations

from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

YAMLError = yaml.YAMLError


def safe_load(text: str | bytes) -> Any:
    """`yaml.safe_load`, with libyaml when available (same results: a safe loader)."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506 - a SafeLoader, C or Python

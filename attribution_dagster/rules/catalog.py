"""The one process-wide cache of the compiled catalogs: parsers and rules.

Compiling the parser catalog (hundreds of regexes) and validating the rule catalog take long
enough to do once per process, and forked workers inherit what the parent loaded.
`load_catalog()` / `load_engine()` always read afresh (tests and `--rules FILE` use them);
everything that analyses jobs goes through these two, keyed by the file they were read from,
and they read the YAML's data through the start-up cache (core/formats/startcache.py).
"""

from __future__ import annotations

import functools
from pathlib import Path

from attribution_dagster.rules.engine import RuleEngine, load_engine
from attribution_dagster.rules.engine.engine import DEFAULT_RULES
from attribution_dagster.rules.parsers import CATALOG_PATH, ParserCatalog, load_catalog


@functools.lru_cache(maxsize=4)
def _parsers(path: Path) -> ParserCatalog:
    return load_catalog(path, cached=True)


@functools.lru_cache(maxsize=4)
def _engine(path: Path) -> RuleEngine:
    return load_engine(path, cached=True)


def parsers(path: Path | None = None) -> ParserCatalog:
    """The compiled parser catalog (default: the packaged parsers.yaml), once per file."""
    return _parsers(Path(path or CATALOG_PATH).resolve())


def engine(path: Path | None = None) -> RuleEngine:
    """The validated rule engine (default: the packaged rules.yaml), once per file."""
    return _engine(Path(path or DEFAULT_RULES).resolve())

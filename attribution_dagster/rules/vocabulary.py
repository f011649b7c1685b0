"""The vocabulary operators edit: observation kinds, failure categories and the XID table.

Three YAML files beside the catalogs (kinds.yaml, categories.yaml, xids.yaml), validated by
the typed models below and loaded once per process by `vocabulary()`. The parser catalog
refuses a kind that is not listed, the rule catalog a kind or category that is not, and the
`xid` decoder reads mnemonics and subsystems from the table. core/ holds only the types
(`Observation.kind`, `AttributionResult.category` are strings); the rules layer owns the words.
"""

from __future__ import annotations

import functools
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from attribution_dagster.core.formats import startcache, yamltext

RULES_DIR = Path(__file__).parent

Domain = Literal["gpu", "network", "collective", "host", "storage", "scheduler", "liveness"]


class VocabularyError(ValueError):
    """kinds.yaml, categories.yaml or xids.yaml is malformed; the message names the file,
    the entry and the field."""


class Kind(BaseModel):
    """One observation kind: what parsers emit and rules match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    domain: Domain
    meaning: str = Field(min_length=1)
    made_by: Literal["parser", "normalizer", "engine"] = Field(
        default="parser",
        description="who emits it: a parser of parsers.yaml, or synthesized by the normalizer "
        "(a file's last line) or the engine (the job state, a silent node)",
    )


class Category(BaseModel):
    """One failure category of the result taxonomy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    meaning: str = Field(min_length=1)


class Source(BaseModel):
    """Where XID facts were taken from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    title: str = Field(min_length=1)
    url: str = Field(pattern=r"^https://")
    mirror: str | None = Field(default=None, pattern=r"^https://")


class Xid(BaseModel):
    """One NVIDIA XID code: what the decoder puts in attrs, and where that came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: int = Field(ge=1)
    mnemonic: str = Field(pattern=r"^[A-Z0-9_]+$")
    subsystem: str
    meaning: str = Field(min_length=1)
    resolution: str | None = None
    source: str = Field(min_length=1)
    date: date


class Vocabulary(BaseModel):
    """Kinds, categories and XIDs, cross-checked: every XID names a known source and
    subsystem, and no code is listed twice."""

    model_config = ConfigDict(frozen=True)

    kinds: dict[str, Kind]
    categories: dict[str, Category]
    sources: dict[str, Source]
    subsystems: dict[str, str]
    xids: dict[int, Xid]

    @model_validator(mode="after")
    def _consistent(self) -> Vocabulary:
        for code, x in self.xids.items():
            if x.source not in self.sources:
                raise ValueError(f"xid {code}: source {x.source!r} is not one of the sources")
            if x.subsystem not in self.subsystems:
                raise ValueError(f"xid {code}: subsystem {x.subsystem!r} is not listed")
        return self


def _read(path: Path, loads: list[startcache.Loaded] | None = None) -> dict[str, Any]:
    """A file's mapping; with `loads`, through the start-up cache (each load is appended, to
    be stored once the whole vocabulary validated)."""
    try:
        if loads is None:
            data = yamltext.safe_load(path.read_text(encoding="utf-8"))
        else:
            loads.append(startcache.load(path))
            data = loads[-1].data
    except (OSError, UnicodeDecodeError, yamltext.YAMLError) as exc:
        raise VocabularyError(f"{path}: {exc}") from exc
    if not isinstance(data, dict):
        raise VocabularyError(f"{path}: expected a mapping")
    return data


def _where(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()))
    return f"{loc}: {err['msg'].removeprefix('Value error, ')}" if loc else err["msg"]


def _xids(path: Path, raw: Any) -> dict[int, Any]:
    if not isinstance(raw, list):
        raise VocabularyError(f"{path}: field 'xids' must be a list of entries")
    out: dict[int, Any] = {}
    for i, entry in enumerate(raw):
        code = entry.get("code") if isinstance(entry, dict) else None
        if not isinstance(code, int):
            raise VocabularyError(f"{path}: xids[{i}]: field 'code' must be an integer")
        if code in out:
            raise VocabularyError(f"{path}: xid {code}: listed twice")
        out[code] = entry
    return out


def load_vocabulary(root: Path = RULES_DIR, cached: bool = False) -> Vocabulary:
    """Read and validate the three files under `root` (every call reads them afresh; `cached`:
    through the start-up cache, docs/performance.md)."""
    kinds, cats, xids = (root / "kinds.yaml", root / "categories.yaml", root / "xids.yaml")
    loads: list[startcache.Loaded] | None = [] if cached else None
    xid_data = _read(xids, loads)
    parts = [
        (kinds, {"kinds": _read(kinds, loads).get("kinds")}),
        (cats, {"categories": _read(cats, loads).get("categories")}),
        (
            xids,
            {
                "sources": xid_data.get("sources"),
                "subsystems": xid_data.get("subsystems"),
                "xids": _xids(xids, xid_data.get("xids")),
            },
        ),
    ]
    fields: dict[str, Any] = {}
    for path, part in parts:
        fields.update(part)
        for name, value in part.items():
            if not isinstance(value, (dict, list)) or not value:
                raise VocabularyError(f"{path}: field '{name}' is missing or empty")
    try:
        vocab = Vocabulary.model_validate(fields)
    except ValidationError as exc:
        loc = exc.errors()[0].get("loc") or ("xids",)  # cross-checks are about the XIDs
        path = {"kinds": kinds, "categories": cats}.get(str(loc[0]), xids)
        raise VocabularyError(f"{path}: {_where(exc)}") from exc
    for loaded in loads or []:
        startcache.store(loaded)
    return vocab


@functools.cache
def vocabulary() -> Vocabulary:
    """The packaged vocabulary, loaded and validated once per process."""
    return load_vocabulary(cached=True)


def category_meanings() -> dict[str, str]:
    """category -> what it means, for reports that print the taxonomy beside their counts."""
    return {name: c.meaning for name, c in vocabulary().categories.items()}

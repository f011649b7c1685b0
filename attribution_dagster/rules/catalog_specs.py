"""The parser catalog's schema (parsers.yaml): parser, anchor, example and origin specs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

CATALOG_PATH = Path(__file__).with_name("parsers.yaml")
EXCERPT_MAX = 300
# Regexes see at most this many characters of a line (and of each continuation line): the
# facts parsers read sit near the start, and it bounds the cost of adversarial long lines.
MATCH_MAX = 4096
_FIELD_TYPES = {"gpu": "int", "code": "int", "pci": "pci", "port": "str", "peer": "str"}


class CatalogError(ValueError):
    """parsers.yaml is malformed; the message names the parser and the field."""


class AnchorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    literal: str = Field(min_length=3)
    context_after: int = Field(default=0, ge=0, le=40)


class ExampleSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    line: str
    context: list[str] = Field(default_factory=list)  # continuation lines (context_after)
    node: str = "node-a"
    nodes: list[str] = Field(default_factory=lambda: ["node-a", "node-b", "node-c"])
    expect: dict[str, Any] | None  # None: this parser must not fire on the line


class ParserSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    kind: str
    description: str = ""
    anchors: list[AnchorSpec] = Field(min_length=1)
    regex: str
    # literals that must all be in the line before the regex runs: Python's `re` does not
    # look for a pattern's required words first, and a line that holds the anchor but not
    # the rest can cost a backtracking search tens of microseconds
    requires: list[str] = Field(default_factory=list)
    fields: dict[str, str] = Field(default_factory=dict)
    attrs: dict[str, str] = Field(default_factory=dict)
    const: dict[str, Any] = Field(default_factory=dict)
    decoder: str | None = None
    group: str | None = None
    node_from: str | None = None
    strip_prefix: bool = False  # match after timestamp / host / srun / torchrun prefixes
    # the scanner keeps only the last line per file holding one of its anchors (progress)
    last_only: bool = False
    # a message split over lines (NVRM prints some over several `NVRM:` lines): continuation
    # lines (context_after) whose text after the line prefix starts with this tag are joined,
    # tag removed, to the first line before the regex runs
    join: str | None = None
    # an attr holding the event's own ISO time (slurmstepd `CANCELLED AT <time>`): it becomes
    # the observation's exact time when the line itself carried none
    time_from: str | None = None
    examples: list[ExampleSpec] = Field(min_length=1)

    @field_validator("anchors", mode="before")
    @classmethod
    def _anchors(cls, v: Any) -> Any:
        return [{"literal": a} if isinstance(a, str) else a for a in v]


class OriginExample(BaseModel):
    model_config = ConfigDict(extra="forbid")
    line: str
    expect: dict[str, Any]  # host / rank / task / local_rank the line's prefixes name


class OriginSpec(BaseModel):
    """A launcher prefix naming where a line came from (parsers.yaml `origins:`)."""

    model_config = ConfigDict(extra="forbid")
    id: str
    description: str = ""
    regex: str
    examples: list[OriginExample] = Field(min_length=1)

    @field_validator("regex")
    @classmethod
    def _groups(cls, v: str) -> str:
        try:
            rx = re.compile(v)
        except re.error as e:
            raise ValueError(f"bad regex: {e}") from e
        unknown = set(rx.groupindex) - set(ORIGIN_KEYS)
        if unknown:
            raise ValueError(f"groups must be among {ORIGIN_KEYS}, got {sorted(rx.groupindex)}")
        return v


ORIGIN_KEYS = ("host", "rank", "task", "local_rank")
# a timestamp before the launcher prefixes (the files scanner keeps the raw line)
_LEAD_STAMP = re.compile(
    r"^(?:\d{4}-\d\d-\d\d[T ][\d:.,]{5,20}(?:Z|[+-]\d\d:?\d\d)?"
    r"|\[(?:\d|[A-Z][a-z]{2} )[^\]]{0,40}\])\s{1,4}"
)

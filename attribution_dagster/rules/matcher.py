"""The per-line matcher: one compiled catalog entry (`Parser`), value conversion, and the
hyperscan dispatch that says which anchors a line holds."""

from __future__ import annotations

import re
import threading
from datetime import datetime, timezone
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.formats.matchers import hyperscan_database
from attribution_dagster.core.formats.timestamps import load_zone
from attribution_dagster.rules.catalog_specs import _FIELD_TYPES, CatalogError, ParserSpec  # noqa: E402
from attribution_dagster.rules.decoders import DECODERS, strip_prefix
from attribution_dagster.rules.parse_metrics import (
    normalize_pci,
)
from attribution_dagster.rules.vocabulary import vocabulary


def _inline_time(value: Any, ctx: ExecutionContext | None) -> datetime | None:
    """An ISO time written inside a line; naive times are in the case's log timezone."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=load_zone(ctx.log_timezone) if ctx is not None else timezone.utc)
    return t.astimezone(timezone.utc)


def _convert(value: str | None, typ: str) -> Any:
    if value is None:
        return None
    try:
        if typ == "int":
            return int(value)
        if typ == "hexint":
            return int(value, 16)
        if typ == "float":
            return float(value)
        if typ == "pci":
            return normalize_pci(value, short=True)
        if typ == "bdf":
            return normalize_pci(value, short=False)
        if typ == "lower":
            return value.strip().lower()
        if typ == "ibport":  # NCCL's `mlx5_3:1` -> `mlx5_3/1`, as node_exporter's device/port
            return value.strip().replace(":", "/")
        if typ == "bool":
            # a group that matched says "yes" (`(?P<fd>failure detected by watchdog)`), unless
            # its text is itself a false word
            return value.strip().lower() not in ("0", "false", "no", "off")
    except (ValueError, OverflowError):
        return None
    v = value.strip()
    return v or None


_DMESG_STAMP = re.compile(r"^\s{0,4}\[\s{0,12}\d{1,12}\.\d{1,9}\]\s?")


def _joined(line: str, text: str, tag: str) -> str:
    """The first line plus the continuation lines that carry the same message tag."""
    parts = [line]
    for cont in text.split("\n")[1:]:
        body = strip_prefix(cont)
        body = _DMESG_STAMP.sub("", body, count=1).lstrip()
        if not body.startswith(tag):
            break
        parts.append(body[len(tag) :].strip())
    return " ".join(parts)


def _group(groups: dict[str, str | None], name: str) -> str | None:
    """A named group's value; `a|b` names alternatives (regex branches), the first set wins."""
    if "|" not in name:
        return groups.get(name)
    for g in name.split("|"):
        if groups.get(g) is not None:
            return groups[g]
    return None


class Parser:
    """One catalog entry. Its regex is compiled here, which validates it (CatalogError), unless
    `groups` gives its group names: a catalog read from the start-up cache was compiled
    without error by an earlier process, and each regex is then compiled on first use."""

    __slots__ = ("spec", "index", "_rx", "fields", "attrs", "decoder", "group_names", "requires")

    def __init__(self, spec: ParserSpec, index: int, groups: list[str] | None = None):
        if spec.kind not in vocabulary().kinds:
            raise CatalogError(f"parser {spec.id}: kind {spec.kind!r} is not in kinds.yaml")
        self.spec = spec
        self._rx: re.Pattern[str] | None = None
        if groups is None:
            self._rx = self._compile()
            self.group_names = set(self._rx.groupindex)
        else:
            self.group_names = set(groups)
        if spec.decoder and spec.decoder not in DECODERS:
            raise CatalogError(f"parser {spec.id}: unknown decoder {spec.decoder!r}")
        self.fields = [
            self._mapping(spec, f, m, default=_FIELD_TYPES.get(f)) for f, m in spec.fields.items()
        ]
        self.attrs = [self._mapping(spec, a, m, default="str") for a, m in spec.attrs.items()]
        for f, _, _ in self.fields:
            if f not in _FIELD_TYPES:
                raise CatalogError(f"parser {spec.id}: unknown field {f!r}")
        if spec.node_from and not set(spec.node_from.split("|")) <= self.group_names:
            raise CatalogError(f"parser {spec.id}: node_from group {spec.node_from!r} not in regex")
        self.index = index
        self.requires = tuple(spec.requires)
        self.decoder = DECODERS[spec.decoder] if spec.decoder else None

    def _compile(self) -> re.Pattern[str]:
        try:
            self._rx = re.compile(self.spec.regex)
        except re.error as e:
            raise CatalogError(f"parser {self.spec.id}: bad regex: {e}") from e
        return self._rx

    @property
    def rx(self) -> re.Pattern[str]:
        """The compiled regex (compiled now if it was not yet)."""
        return self._rx if self._rx is not None else self._compile()

    def _mapping(
        self, spec: ParserSpec, key: str, m: str, default: str | None
    ) -> tuple[str, str, str]:
        group, _, typ = m.partition(":")
        if not set(group.split("|")) <= self.group_names:  # "a|b": the first that matched
            raise CatalogError(f"parser {spec.id}: {key} maps to missing group {group!r}")
        return key, group, typ or default or "str"

    def match(
        self, line: str, text: str, stripped: list[str] | None = None
    ) -> dict[str, Any] | None:
        """A draft (fields, attrs, node_host, excerpt) or None. `stripped`: the record's
        line without its prefixes, once some parser stripped it (the parsers of one line
        share it: a list, empty until then)."""
        if self.spec.join and "\n" in text:
            line = _joined(line, text, self.spec.join)
            stripped = None  # the joined line is another line
        for lit in self.requires:
            if lit not in line:
                return None
        subject = line
        if self.spec.strip_prefix:
            if stripped is None:
                subject = strip_prefix(line)
            else:
                if not stripped:
                    stripped.append(strip_prefix(line))
                subject = stripped[0]
        rx = self._rx if self._rx is not None else self._compile()
        m = rx.search(subject)
        if m is None:
            return None
        groups = m.groupdict()
        fields: dict[str, Any] = {}
        for key, group, typ in self.fields:
            val = _convert(_group(groups, group), typ)
            if val is not None:
                fields[key] = val
        attrs: dict[str, Any] = dict(self.spec.const)
        for key, group, typ in self.attrs:
            val = _convert(_group(groups, group), typ)
            if val is not None:
                attrs[key] = val
        draft: dict[str, Any] = {"fields": fields, "attrs": attrs}
        if self.spec.node_from:
            draft["node_host"] = _group(groups, self.spec.node_from)
        if self.decoder is not None:
            try:
                if not self.decoder(groups, text, draft):
                    return None
            except Exception:  # a decoder bug must not stop an analysis; keep the bare match
                draft["attrs"]["decode_failed"] = True
        return draft


class _HyperscanDispatch:
    """Which anchors a line holds, in one hyperscan pass (5x the plain `in` loop).

    Optional: without hyperscan (or on any hyperscan error) the catalog uses `in` tests.
    Scratch space is per thread, as hyperscan requires.
    """

    def __init__(self, hs: Any, db: Any):
        self._hs, self._db, self._local = hs, db, threading.local()

    @classmethod
    def build(cls, literals: list[str]) -> _HyperscanDispatch | None:
        try:
            import hyperscan
        except ImportError:
            return None
        try:
            db = hyperscan_database(
                "dispatch",
                [re.escape(lit).encode() for lit in literals],
                [hyperscan.HS_FLAG_SINGLEMATCH] * len(literals),
            )
        except Exception:
            return None
        return cls(hyperscan, db)

    @staticmethod
    def _on_match(i: int, _from: int, _to: int, _flags: int, found: set[int]) -> None:
        found.add(i)

    def present(self, line: str) -> set[int] | None:
        """Indexes of anchors present in the line, or None to fall back to `in` tests."""
        scratch = getattr(self._local, "scratch", None)
        try:
            if scratch is None:
                scratch = self._local.scratch = self._hs.Scratch(self._db)
            found: set[int] = set()
            self._db.scan(
                line.encode("utf-8", "surrogatepass"),
                match_event_handler=self._on_match,
                context=found,
                scratch=scratch,
            )
            return found
        except Exception:
            return None

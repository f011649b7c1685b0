"""The Query DSL the source sends, to Elasticsearch and OpenSearch alike: the job's nodes
and window as filters, the anchors pushed down as a query, and the sorts that page through
a point in time (plain dicts, no I/O)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol


class QueryConfig(Protocol):
    """The fields of a Query DSL block (source.SearchConfig) that the queries use."""

    time_field: str
    node_field: str
    message_field: str
    filters: dict[str, str]
    anchor_query: Literal["match_phrase", "wildcard", "none"]
    wildcard_field: str | None
    tiebreaker: str


def node_clause(config: QueryConfig, names: Sequence[str]) -> dict[str, Any]:
    """Documents of these nodes: the exact names, or a name followed by its domain
    (`gpu-a.cluster.local` for `gpu-a`)."""
    should: list[dict[str, Any]] = [{"terms": {config.node_field: list(names)}}]
    should += [{"prefix": {config.node_field: f"{n}."}} for n in names if "." not in n]
    return {"bool": {"should": should, "minimum_should_match": 1}}


def window_clause(config: QueryConfig, start: datetime, end: datetime) -> dict[str, Any]:
    """[start, end], both ends inclusive (the Window's bounds), as ISO 8601."""
    return {
        "range": {
            config.time_field: {
                "gte": start.isoformat(),
                "lte": end.isoformat(),
                "format": "strict_date_optional_time_nanos",
            }
        }
    }


def escape_wildcard(literal: str) -> str:
    """A literal inside a `wildcard` pattern: `*`, `?` and `\\` escaped."""
    return "".join("\\" + c if c in "*?\\" else c for c in literal)


def anchors_clause(config: QueryConfig, literals: Sequence[str]) -> dict[str, Any] | None:
    """Lines holding any of the literals, as the configured pushdown; None: no pushdown."""
    if not literals or config.anchor_query == "none":
        return None
    if config.anchor_query == "wildcard":
        field = config.wildcard_field or config.message_field
        should = [{"wildcard": {field: {"value": f"*{escape_wildcard(lit)}*"}}} for lit in literals]
    else:
        should = [{"match_phrase": {config.message_field: lit}} for lit in literals]
    return {"bool": {"should": should, "minimum_should_match": 1}}


def search_query(
    config: QueryConfig,
    names: Sequence[str],
    start: datetime,
    end: datetime,
    literals: Sequence[str] = (),
) -> dict[str, Any]:
    """The `query` of a search: nodes, window and extra filters as filters (no scoring),
    the anchors as a `must`."""
    filters: list[dict[str, Any]] = [node_clause(config, names), window_clause(config, start, end)]
    filters += [{"term": {k: v}} for k, v in config.filters.items()]
    query: dict[str, Any] = {"bool": {"filter": filters}}
    anchors = anchors_clause(config, literals)
    if anchors is not None:
        query["bool"]["must"] = [anchors]
    return query


def sort(config: QueryConfig, order: str) -> list[dict[str, Any]]:
    """Time, then the tiebreaker (`_shard_doc` inside a point in time, `_id` where the
    server has no `_shard_doc`: OpenSearch before 3.3): a total order, so `search_after`
    pages never skip or repeat a document."""
    return [
        {config.time_field: {"order": order, "format": "strict_date_optional_time_nanos"}},
        {config.tiebreaker: order},
    ]


def field_value(doc: Mapping[str, Any], path: str) -> Any:
    """A field of `_source` by dotted path, flat (`{"host.name": ..}`) or nested
    (`{"host": {"name": ..}}`) or mixed."""
    if path in doc:
        return doc[path]
    parts = path.split(".")
    for k in range(1, len(parts)):
        sub = doc.get(".".join(parts[:k]))
        if isinstance(sub, Mapping):
            found = field_value(sub, ".".join(parts[k:]))
            if found is not None:
                return found
    return None

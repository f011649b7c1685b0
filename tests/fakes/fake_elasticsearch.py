"""A fake Elasticsearch on tests/fakes/fake_http.py: the point-in-time and search endpoints
the elasticsearch log source calls, answering in the REST API's JSON shapes.

The envelopes are the recorded shapes in tests/fixtures/elasticsearch/ (open_pit.json,
search_page.json, close_pit.json, error_*.json, in the shapes of the Elasticsearch REST API
reference for `POST /<index>/_pit`, `POST /_search` with `pit` and `search_after`, and
`DELETE /_pit`); the fake fills their `hits` from the documents it holds. It evaluates the
subset of the Query DSL the source sends (bool filter/must/should, term, terms, prefix,
range on the time field, match_phrase over a standard-analyzer-like tokenization, wildcard),
sorts by time and `_shard_doc`, honours `search_after`, `size` and `collapse`. Every answer
carries `X-Elastic-Product: Elasticsearch`, which the official client checks.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "elasticsearch"
HEADERS = {"X-Elastic-Product": "Elasticsearch"}


def recorded(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def tokens(text: str) -> list[str]:
    """The standard analyzer, closely enough: lowercased runs of letters and digits."""
    return re.findall(r"[^\W_]+", text.lower())


def field(doc: dict[str, Any], path: str) -> Any:
    if path in doc:
        return doc[path]
    parts = path.split(".")
    for k in range(1, len(parts)):
        sub = doc.get(".".join(parts[:k]))
        if isinstance(sub, dict):
            found = field(sub, ".".join(parts[k:]))
            if found is not None:
                return found
    return None


def when(value: Any) -> datetime:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00"))


class FakeElasticsearch:
    fixtures = FIXTURES
    headers = HEADERS
    pit_path = "/_pit"  # POST /<index>/_pit
    pit_answer = ("open_pit.json", "id", "pit-")  # fixture, id key, id prefix
    close_path = "/_pit"  # DELETE, the id in the body

    def __init__(self, index: str = ".ds-logs-generic-default-2026.11.02-000001",
                 time_field: str = "@timestamp") -> None:  # fmt: skip
        self.index = index
        self.time_field = time_field
        self.docs: list[dict[str, Any]] = []
        self.pits: set[str] = set()
        self.closed: list[str] = []
        self.searches: list[dict[str, Any]] = []
        self.keep_alives: list[str | None] = []
        # (body) -> (status, error body[, headers]) or None: inject failures
        self.fail: Callable[[dict[str, Any]], tuple | None] = lambda body: None

    def add(self, doc: dict[str, Any]) -> None:
        self.docs.append(doc)

    def recorded(self, name: str) -> Any:
        return json.loads((self.fixtures / name).read_text())

    def tiebreak(self, i: int) -> Any:
        """The sort value after time: `_shard_doc` (shard ordinal and Lucene doc, here the
        document's position)."""
        return i

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        """What the server says to a search it cannot run (none here)."""
        return None

    def answer(self, failure: tuple) -> tuple:
        """An injected (status, body[, headers]) with the server's own headers added."""
        return failure[0], failure[1], {**self.headers, **(failure[2] if failure[2:] else {})}

    def install(self, fake_http: Any) -> None:
        fake_http.route_prefix("POST", "/", self._open_pit)  # POST /<index>/_pit
        fake_http.route("POST", "/_search", self._search)
        fake_http.route("DELETE", self.close_path, self._close_pit)

    # -- endpoints --------------------------------------------------------------------------
    def _open_pit(self, req: Any) -> tuple:
        if not req.path.endswith(self.pit_path):
            return 404, {"error": f"no fake route for POST {req.path}"}, self.headers
        self.keep_alives.append(req.arg("keep_alive"))
        failure = self.refuse_pit(req) or self.fail({"open_pit": req.path})
        if failure is not None:
            return self.answer(failure)
        fixture, key, prefix = self.pit_answer
        body = self.recorded(fixture)
        body[key] = f"{prefix}{len(self.pits) + 1}"
        self.pits.add(body[key])
        return 200, body, self.headers

    def refuse_pit(self, req: Any) -> tuple | None:
        """What the server says to a point-in-time request it cannot serve (none here)."""
        return None

    def _close_pit(self, req: Any) -> tuple:
        pit = req.json().get("id")
        self.closed.append(pit)
        self.pits.discard(pit)
        return 200, self.recorded("close_pit.json"), self.headers

    def _search(self, req: Any) -> tuple:
        body = req.json() or {}
        self.searches.append(body)
        failure = self.fail(body) or self.refuse(body)
        if failure is not None:
            return self.answer(failure)
        pit = (body.get("pit") or {}).get("id")
        if pit not in self.pits:
            return 404, {"error": {"root_cause": [{"type": "search_context_missing_exception",
                         "reason": "No search context found for id"}],
                         "type": "search_phase_execution_exception",
                         "reason": "all shards failed"}, "status": 404}, self.headers  # fmt: skip
        order = [next(iter(s.values())) for s in body.get("sort", [])]
        desc = bool(order) and (order[0].get("order") if isinstance(order[0], dict)
                                else order[0]) == "desc"  # fmt: skip
        rows = [(when(field(d, self.time_field)), i, d) for i, d in enumerate(self.docs)
                if self.matches(d, body.get("query") or {"match_all": {}})]  # fmt: skip
        rows.sort(key=lambda r: (r[0], self.tiebreak(r[1])), reverse=desc)
        after = body.get("search_after")
        if after:
            key = (when(after[0]), after[1])
            rows = [r for r in rows if ((r[0], self.tiebreak(r[1])) < key if desc
                                        else (r[0], self.tiebreak(r[1])) > key)]  # fmt: skip
        collapse = (body.get("collapse") or {}).get("field")
        if collapse:
            seen: set[Any] = set()
            kept = []
            for r in rows:
                v = field(r[2], collapse)
                if v not in seen:
                    seen.add(v)
                    kept.append(r)
            rows = kept
        size = int(body.get("size", 10))
        page = self.recorded("search_page.json")
        page["pit_id"] = pit
        page["hits"]["total"] = {"value": len(rows), "relation": "eq"}
        page["hits"]["hits"] = [self._hit(t, i, d, collapse) for t, i, d in rows[:size]]
        return 200, page, self.headers

    def _hit(self, t: datetime, i: int, doc: dict[str, Any], collapse: str | None) -> dict:
        hit = {
            "_index": self.index,
            "_id": f"doc-{i:06d}",
            "_score": None,
            "_source": copy.deepcopy(doc),
            "sort": [t.isoformat(timespec="microseconds").replace("+00:00", "Z"), self.tiebreak(i)],
        }
        if collapse:
            hit["fields"] = {collapse: [field(doc, collapse)]}
        return hit

    # -- the Query DSL subset -----------------------------------------------------------------
    def matches(self, doc: dict[str, Any], clause: dict[str, Any]) -> bool:
        ((kind, arg),) = clause.items()
        if kind == "match_all":
            return True
        if kind == "bool":
            if not all(self.matches(doc, c) for c in arg.get("filter", []) + arg.get("must", [])):
                return False
            if any(self.matches(doc, c) for c in arg.get("must_not", [])):
                return False
            should = arg.get("should", [])
            need = arg.get("minimum_should_match", 0 if ("filter" in arg or "must" in arg) else 1)
            return not should or sum(self.matches(doc, c) for c in should) >= min(need, 1)
        ((name, value),) = arg.items()
        got = field(doc, name)
        if kind == "term":
            return got == value
        if kind == "terms":
            return got in value
        if kind == "prefix":
            return isinstance(got, str) and got.startswith(value)
        if kind == "range":
            t = when(got)
            return (("gte" not in value or t >= when(value["gte"]))
                    and ("lte" not in value or t <= when(value["lte"])))  # fmt: skip
        if kind == "match_phrase":
            want, have = tokens(value), tokens(str(got or ""))
            return bool(want) and any(have[k : k + len(want)] == want for k in range(len(have)))
        if kind == "wildcard":
            pattern = value["value"]
            rx = "".join(
                re.escape(tok[1]) if len(tok) == 2 and tok[0] == "\\"
                else ".*" if tok == "*" else "." if tok == "?" else re.escape(tok)
                for tok in re.findall(r"\\.|.", pattern, re.S)
            )  # fmt: skip
            return isinstance(got, str) and re.fullmatch(rx, got, re.S) is not None
        raise AssertionError(f"the fake does not know the {kind!r} query")

"""A fake OpenSearch 2.x on tests/fakes/fake_http.py: FakeElasticsearch's documents and
Query DSL subset behind OpenSearch's own point-in-time API and answer shapes.

The answers are the recorded shapes in tests/fixtures/opensearch/, as the OpenSearch 2.x
API reference gives them (they are not captured from a live cluster):
`POST /<index>/_search/point_in_time?keep_alive=` -> `{pit_id, _shards, creation_time}`,
`DELETE /_search/point_in_time` with `{"pit_id": [..]}` -> `{pits: [{successful, pit_id}]}`,
`POST /_search` with `pit`, `sort`, `search_after`, `collapse` -> hits whose `sort` values
end in the `_id` tiebreaker. Like OpenSearch before 3.3 it has no `_shard_doc` sort (the
recorded `query_shard_exception`), a missing `keep_alive` is a 400, and no answer carries
`X-Elastic-Product` (so the official elasticsearch client would refuse it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fake_elasticsearch import FakeElasticsearch

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "opensearch"
HEADERS: dict[str, str] = {}  # fake_http adds the JSON Content-Type; no product header


class FakeOpenSearch(FakeElasticsearch):
    fixtures = FIXTURES
    headers = HEADERS

    def __init__(self, index: str = "logs-gpu-2026.11.02", **kw: Any) -> None:
        super().__init__(index=index, **kw)
        self.keep_alives: list[str | None] = []

    def install(self, fake_http: Any) -> None:
        fake_http.route_prefix("POST", "/", self._create_pit)
        fake_http.route("POST", "/_search", self._search)
        fake_http.route("DELETE", "/_search/point_in_time", self._delete_pit)

    def tiebreak(self, i: int) -> Any:
        return f"doc-{i:06d}"  # the hit's `_id`

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        fields = [k for s in body.get("sort", []) for k in (s if isinstance(s, dict) else {s: 1})]
        return (400, self.recorded("error_shard_doc.json")) if "_shard_doc" in fields else None

    def _create_pit(self, req: Any) -> tuple:
        if not req.path.endswith("/_search/point_in_time"):
            return 404, {"error": f"no fake route for POST {req.path}"}, self.headers
        self.keep_alives.append(req.arg("keep_alive"))
        if not req.arg("keep_alive"):
            return 400, {"error": {"root_cause": [{"type": "action_request_validation_exception",
                         "reason": "Validation Failed: 1: keep alive not specified;"}],
                         "type": "action_request_validation_exception",
                         "reason": "Validation Failed: 1: keep alive not specified;"},
                         "status": 400}, self.headers  # fmt: skip
        failure = self.fail({"open_pit": req.path})
        if failure is not None:
            return self.answer(failure)
        body = self.recorded("create_pit.json")
        body["pit_id"] = f"os-pit-{len(self.pits) + 1}"
        self.pits.add(body["pit_id"])
        return 200, body, self.headers

    def _delete_pit(self, req: Any) -> tuple:
        answer = self.recorded("delete_pit.json")
        shape = answer["pits"][0]
        answer["pits"] = []
        for pit in (req.json() or {}).get("pit_id") or []:
            self.closed.append(pit)
            answer["pits"].append({**shape, "successful": pit in self.pits, "pit_id": pit})
            self.pits.discard(pit)
        return 200, answer, self.headers

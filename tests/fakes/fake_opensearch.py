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
    pit_path = "/_search/point_in_time"  # POST /<index>/_search/point_in_time?keep_alive=
    pit_answer = ("create_pit.json", "pit_id", "os-pit-")
    close_path = "/_search/point_in_time"  # DELETE, {"pit_id": [..]}

    def __init__(self, index: str = "logs-gpu-2026.11.02", **kw: Any) -> None:
        super().__init__(index=index, **kw)

    def tiebreak(self, i: int) -> Any:
        return f"doc-{i:06d}"  # the hit's `_id`

    def refuse(self, body: dict[str, Any]) -> tuple[int, Any] | None:
        fields = [k for s in body.get("sort", []) for k in (s if isinstance(s, dict) else {s: 1})]
        return (400, self.recorded("error_shard_doc.json")) if "_shard_doc" in fields else None

    def refuse_pit(self, req: Any) -> tuple | None:
        if req.arg("keep_alive"):
            return None
        reason = "Validation Failed: 1: keep alive not specified;"
        err = {"type": "action_request_validation_exception", "reason": reason}
        return 400, {"error": {"root_cause": [err], **err}, "status": 400}

    def _close_pit(self, req: Any) -> tuple:
        answer = self.recorded("delete_pit.json")
        shape = answer["pits"][0]
        answer["pits"] = []
        for pit in (req.json() or {}).get("pit_id") or []:
            self.closed.append(pit)
            answer["pits"].append({**shape, "successful": pit in self.pits, "pit_id": pit})
            self.pits.discard(pit)
        return 200, answer, self.headers

"""A tiny Kubernetes API server on top of `fake_http`: list/get of stored API objects.

It serves the REST paths the official `kubernetes` client calls
(`/api/v1/namespaces/<ns>/pods`, `/apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>]`)
with `labelSelector` (`k=v`, `k`, comma = and), `limit` and `continue` pagination, and
`Status` objects for errors, the way kube-apiserver answers. Objects come from the
`kubectl get -o json` style `List` files under tests/fixtures/k8s/.

    api = FakeKubeAPI(fake_http)
    api.load("jobset-failed-oom.json")
    api.fail("/apis/kueue.x-k8s.io", 403, "workloads.kueue.x-k8s.io is forbidden: ...")
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from fake_http import FakeHTTPServer, Request

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"

PLURALS = {
    "Workload": "workloads",
    "JobSet": "jobsets",
    "Job": "jobs",
    "Pod": "pods",
    "Event": "events",
    "Node": "nodes",
}


def load_items(name: str) -> list[dict[str, Any]]:
    return json.loads((FIXTURES / name).read_text())["items"]


def status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": details,
        "code": code,
    }


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    for term in filter(None, (selector or "").split(",")):
        if "=" in term:
            key, _, value = term.partition("=")
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term not in labels:
            return False
    return True


class FakeKubeAPI:
    def __init__(self, http: FakeHTTPServer) -> None:
        self.http = http
        self.objects: list[dict[str, Any]] = []
        self.failures: list[tuple[str, int, dict[str, Any] | str]] = []
        self.delay: tuple[str, float] | None = None
        http.route_prefix("GET", "/api/", self._serve)
        http.route_prefix("GET", "/apis/", self._serve)

    @property
    def url(self) -> str:
        return self.http.url

    def load(self, *names: str) -> FakeKubeAPI:
        for name in names:
            self.objects.extend(load_items(name))
        return self

    def fail(self, prefix: str, code: int, body: dict[str, Any] | str) -> None:
        """Requests whose path starts with `prefix` answer `code` with `body`."""
        self.failures.append((prefix, code, body))

    def sleep(self, prefix: str, seconds: float) -> None:
        self.delay = (prefix, seconds)

    def _collection(self, obj: dict[str, Any]) -> str:
        api = obj["apiVersion"]
        base = "/api/v1" if api == "v1" else f"/apis/{api}"
        return f"{base}/{PLURALS[obj['kind']]}"

    def _serve(self, req: Request) -> tuple:
        if self.delay and req.path.startswith(self.delay[0]):
            time.sleep(self.delay[1])
        for prefix, code, body in self.failures:
            if req.path.startswith(prefix):
                return code, body
        parts = req.path.strip("/").split("/")
        # api/v1/... or apis/<group>/<version>/...
        base = parts[:2] if parts[0] == "api" else parts[:3]
        rest = parts[len(base) :]
        namespace = None
        if len(rest) >= 2 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        collection = "/" + "/".join([*base, plural])
        items = [
            o
            for o in self.objects
            if self._collection(o) == collection
            and (namespace is None or o["metadata"].get("namespace") == namespace)
        ]
        known = {self._collection(o).rsplit("/", 1)[0] for o in self.objects}
        known |= {"/api/v1", "/apis/batch/v1"}
        if "/" + "/".join(base) not in known:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        if name is not None:
            for o in items:
                if o["metadata"]["name"] == name:
                    return 200, o
            group = base[1] if base[0] == "apis" else ""
            return 404, status(
                404,
                "NotFound",
                f'{plural}{"." + group if group else ""} "{name}" not found',
                name=name,
                group=group,
                kind=plural,
            )
        items = [
            o
            for o in items
            if _matches(o["metadata"].get("labels") or {}, req.arg("labelSelector"))
        ]
        offset = int(req.arg("continue") or 0)
        limit = int(req.arg("limit") or 0) or len(items) or 1
        page = items[offset : offset + limit]
        meta: dict[str, Any] = {"resourceVersion": "123456"}
        if offset + limit < len(items):
            meta["continue"] = str(offset + limit)
        kind = (page[0]["kind"] if page else plural.capitalize().rstrip("s")) + "List"
        return 200, {
            "apiVersion": "/".join(base[1:]),
            "kind": kind,
            "metadata": meta,
            "items": page,
        }

"""A fake Kubernetes API for the pod_logs source: the paths it calls (pod logs with kubelet
timestamps, sinceSeconds and limitBytes; pods; events), answered from test data and the
recorded Status bodies in tests/fixtures/k8s (real API shapes)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
NOW = datetime(2026, 11, 20, 10, 40, tzinfo=timezone.utc)


def fixture(name: str) -> Any:
    return json.loads((FIX / name).read_text())


class FakeKube:
    """The Kubernetes API paths the pod_logs source calls, answered from test data."""

    def __init__(self, fake_http: Any, now: datetime = NOW) -> None:
        self.now = now
        self.logs: dict[tuple[str, str, str, bool], bytes] = {}
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.fail: list[tuple[str, Any]] = []  # (path prefix, (status, body) or callable)
        fake_http.route_prefix("GET", "/api/v1/", self.handle)

    def pod(self, ns: str, name: str, node: str, containers: list[str], labels=None) -> None:
        self.pods[(ns, name)] = {
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": c} for c in containers]},
        }

    def handle(self, req: Any) -> tuple:
        for prefix, answer in self.fail:
            if req.path.startswith(prefix):
                return answer(req) if callable(answer) else answer
        parts = req.path.strip("/").split("/")[2:]  # after api/v1
        if parts[:1] == ["namespaces"] and parts[2:3] == ["pods"] and parts[4:5] == ["log"]:
            return self._log(parts[1], parts[3], req)
        if parts[:1] == ["namespaces"] and parts[2:3] == ["pods"] and len(parts) == 4:
            pod = self.pods.get((parts[1], parts[3]))
            return (200, pod) if pod else (404, fixture("podlogs-status-404.json"))
        if parts in (["pods"], ["namespaces", parts[1] if len(parts) > 1 else "", "pods"]):
            return 200, self._pod_list(parts[1] if len(parts) == 3 else None, req)
        if parts == ["events"] or (parts[:1] == ["namespaces"] and parts[2:] == ["events"]):
            return 200, self._event_list(parts[1] if len(parts) == 3 else None, req)
        return 404, {"kind": "Status", "code": 404, "message": f"no fake for {req.path}"}

    def _log(self, ns: str, name: str, req: Any) -> tuple:
        previous = (req.arg("previous") or "").lower() == "true"  # ParseBool: True, true, 1
        key = (ns, name, req.arg("container") or "", previous)
        if key not in self.logs:
            if not any(k[:2] == (ns, name) for k in self.logs) and (ns, name) not in self.pods:
                return 404, fixture("podlogs-status-404.json")
            return 400, fixture("podlogs-status-400-previous.json")
        data = self.logs[key]
        if (req.arg("timestamps") or "").lower() != "true":
            raise AssertionError("the source must ask for kubelet timestamps")
        since = req.arg("sinceSeconds")
        if since is not None:
            cut = self.now - timedelta(seconds=int(since))
            kept = [
                ln for ln in data.splitlines(keepends=True)
                if datetime.fromisoformat(ln[:26].decode() + "+00:00") >= cut.replace(microsecond=0)
            ]
            data = b"".join(kept)
        limit = req.arg("limitBytes")
        if limit is not None:
            data = data[: int(limit)]
        return 200, data, {"Content-Type": "text/plain"}

    def _pod_list(self, ns: str | None, req: Any) -> dict[str, Any]:
        sel = dict(p.split("=", 1) for p in (req.arg("labelSelector") or "").split(",") if p)
        items = [
            p for (pns, _), p in self.pods.items()
            if (ns is None or pns == ns)
            and all(p["metadata"]["labels"].get(k) == v for k, v in sel.items())
        ]
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}

    def _event_list(self, ns: str | None, req: Any) -> dict[str, Any]:
        sel = dict(p.split("=", 1) for p in (req.arg("fieldSelector") or "").split(",") if p)
        out = []
        for ev in self.events:
            obj = ev.get("involvedObject") or {}
            if ns is not None and ev["metadata"].get("namespace") != ns:
                continue
            if "involvedObject.name" in sel and obj.get("name") != sel["involvedObject.name"]:
                continue
            if "involvedObject.kind" in sel and obj.get("kind") != sel["involvedObject.kind"]:
                continue
            out.append(ev)
        return {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"},
                "items": out}

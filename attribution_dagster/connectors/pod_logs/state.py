"""What one pod-log fetch carries (the pods, the run's records and coverage, where each
container log ends, the anchor matcher) and the helpers over the API's responses."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import Anchor, RawRecord, SourceCoverage
from attribution_dagster.core.hosts import NodeIndex
from attribution_dagster.core.settings import Window

MiB = 1024 * 1024
KUBELET_TS = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")
EVENTS_PAGE = 500  # events per list request


@dataclass
class Pod:
    namespace: str
    name: str
    k8s_node: str | None  # spec.nodeName
    node: str  # the job node it resolves to (or the Kubernetes name when it does not)
    containers: list[str]

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Run:
    """What one fetch_logs call has read so far."""

    ctx: ExecutionContext
    window: Window
    index: NodeIndex
    cov: SourceCoverage
    records: list[RawRecord] = field(default_factory=list)
    tails: list[RawRecord] = field(default_factory=list)  # LogBatch.tails
    progress: list[RawRecord] = field(default_factory=list)  # LogBatch.progress
    ok_queries: int = 0
    transient: bool = False
    auth_failed: bool = False

    def error(self, message: str, *, transient: bool = False) -> None:
        self.cov.errors.append(message[:500])
        self.transient = self.transient or transient


@dataclass
class Ends:
    """Where one container log stops: its last timed line and its last progress line (the
    records the engine's liveness reads), until the container's logs are known whole."""

    previous: bool
    tail: RawRecord | None = None
    progress: RawRecord | None = None


class Matcher:
    """Which lines to keep: any anchor literal, and how many continuation lines it asks for;
    which lines are training progress (`last_only` anchors: only a log's last one is kept)."""

    def __init__(self, anchors: Sequence[Anchor]) -> None:
        last = sorted({a.literal for a in anchors if a.last_only}, key=len, reverse=True)
        self._progress_rx = re.compile("|".join(map(re.escape, last))) if last else None
        anchors = [a for a in anchors if not a.last_only]  # progress: not every line of it
        lits = sorted({a.literal for a in anchors}, key=len, reverse=True)
        self._rx = re.compile("|".join(map(re.escape, lits))) if lits else None
        self._context = [(a.literal, a.context_after) for a in anchors if a.context_after]

    def hit(self, text: str) -> bool:
        return self._rx is not None and self._rx.search(text) is not None

    def progress(self, text: str) -> bool:
        return self._progress_rx is not None and self._progress_rx.search(text) is not None

    def context_after(self, text: str) -> int:
        return max((n for lit, n in self._context if lit in text), default=0)


def parse_ts(stamp: str | None) -> datetime | None:
    from attribution_dagster.core.formats.kube_events import parse_time

    return parse_time(stamp) if stamp else None


def response_lines(resp: Any, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """Lines of a streamed urllib3 response, without their newline."""
    carry = b""
    stream = resp.stream(chunk) if hasattr(resp, "stream") else iter([resp.data])
    for block in stream:
        if not block:
            continue
        carry += block
        parts = carry.split(b"\n")
        carry = parts.pop()
        yield from parts
    if carry:
        yield carry


def close_response(resp: Any) -> None:
    for name in ("release_conn", "close"):
        fn = getattr(resp, name, None)
        if callable(fn):
            try:
                fn()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass


def api_error(exc: BaseException) -> tuple[int | None, str]:
    """(HTTP status or None for a transport failure, one-line message) of a client error."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        body = getattr(exc, "body", None)
        message = ""
        if body:
            try:
                data = json.loads(body)
                message = str(data.get("message") or "") if isinstance(data, dict) else ""
            except (ValueError, TypeError):
                message = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
        message = message or str(getattr(exc, "reason", "") or "")
        return status, " ".join(message.split())[:300]
    reason = getattr(exc, "reason", None)  # urllib3 MaxRetryError wraps the cause
    text = str(reason or exc) or type(exc).__name__
    low = text.lower()
    if "timed out" in low or "timeout" in low:
        text = f"timed out ({text})"
    return None, " ".join(text.split())[:300]

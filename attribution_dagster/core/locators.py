"""Where a line or sample came from, typed: a file line, a LogQL/PromQL query and time, a
Kubernetes object. Rendered as the contract's `locator` string only at the edge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# --- locators: where a line or sample can be reopened ----------------------------------------
# A locator is typed from the moment a connector reads a line until the result is written, so
# nothing downstream parses a `path:line` string back (which file, which line, which query).
# It renders as the contract string (spec section 2: `logs/node-b/kern.log:32`, a LogQL or
# PromQL query plus its time) only at the edge: `str(locator)` / `locator.render()`.


class _LocatorBase(BaseModel):
    model_config = ConfigDict(frozen=True)

    def render(self) -> str:  # pragma: no cover - every variant overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.render()

    @property
    def stream(self) -> str:
        """What the located line belongs to, the same for every line of it: a file, a log
        store's stream or query, a pod's container log (parsers group a stream's lines)."""
        raise NotImplementedError  # pragma: no cover

    @property
    def position(self) -> int | None:
        """Where in its stream, when lines of one stream can be ordered by it (file line)."""
        return None


class FileLine(_LocatorBase):
    """A line of a file: `root` is the case or root directory it was read under (so a person
    knows which case a line is in), `path` the file as shown (relative to a case directory,
    `logs/node-b/kern.log`; a shared root's files by their absolute path), `line` its line
    number (1-based), or `field` a named field instead of a line (`context.json:state`)."""

    type: Literal["file"] = "file"
    root: str | None = None
    path: str
    line: int | None = Field(default=None, ge=0)
    field: str | None = None

    def render(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}"
        return f"{self.path}:{self.field}" if self.field else self.path

    @property
    def stream(self) -> str:
        return self.path

    @property
    def position(self) -> int | None:
        return self.line


class QueryAt(_LocatorBase):
    """A LogQL or PromQL query and the time of the line / sample it returned (Unix ns):
    paste the query into Grafana Explore around that time to see it again."""

    type: Literal["query"] = "query"
    language: Literal["logql", "promql"]
    query: str
    at_ns: int

    def render(self) -> str:
        if self.language == "logql":
            return f"{self.query} @ns:{self.at_ns}"
        return f"promql: {self.query} @ {_seconds(self.at_ns)}"

    @property
    def stream(self) -> str:
        return self.query

    @property
    def position(self) -> int | None:
        # a log store's lines of one stream are ordered by time; this is what the `@ns:`
        # suffix of the rendered form carried before locators were typed
        return self.at_ns if self.language == "logql" else None


def _seconds(ns: int) -> str:
    """Unix ns as Prometheus prints a timestamp: seconds, up to 3 decimals, no trailing 0."""
    sec, ms = divmod(round(ns / 1_000_000), 1000)
    return f"{sec}.{ms:03d}".rstrip("0").rstrip(".")


class KubeObject(_LocatorBase):
    """A Kubernetes object read through the API: a pod's container log (`field`: the kubelet
    timestamp of the line, or `line N` when it had none) or an Event (`kubectl get event -n
    <namespace> <name> -o yaml` reopens it)."""

    type: Literal["k8s"] = "k8s"
    kind: Literal["pod_log", "event"]
    namespace: str
    name: str
    container: str | None = None
    previous: bool = False
    field: str | None = None

    def render(self) -> str:
        if self.kind == "event":
            return f"event {self.namespace}/{self.name}"
        out = f"pod {self.namespace}/{self.name} container {self.container}"
        out += " previous" if self.previous else ""
        return f"{out} @ {self.field}" if self.field else out

    @property
    def stream(self) -> str:
        if self.kind == "event":
            return "events"
        return f"pod {self.namespace}/{self.name} container {self.container}" + (
            " previous" if self.previous else ""
        )


class SearchHit(_LocatorBase):
    """A document of a search back-end (Elasticsearch / OpenSearch): `GET <index>/_doc/<id>`
    reopens it. `stream_key` names what it belongs to (the node and its log file), `at_ns`
    its time (Unix ns): lines of one stream are ordered by it."""

    type: Literal["search"] = "search"
    index: str
    doc_id: str
    stream_key: str
    at_ns: int

    def render(self) -> str:
        return f"{self.index}/_doc/{self.doc_id}"

    @property
    def stream(self) -> str:
        return self.stream_key

    @property
    def position(self) -> int | None:
        return self.at_ns


class Note(_LocatorBase):
    """A locator known only as text: an observation made up for an example or a test, whose
    line was never read from a source. Rendered as given; it has no file, line or query, and
    no connector produces one (the conformance suite checks that)."""

    type: Literal["note"] = "note"
    text: str

    def render(self) -> str:
        return self.text

    @property
    def stream(self) -> str:
        return self.text


class DumpEntry(_LocatorBase):
    """A place in a PyTorch flight-recorder dump (`dumps/nccl_trace_rank_17`): the process
    group and collective sequence number an entry is about (`dumps/nccl_trace_rank_17:pg 0
    seq 412`), or the whole dump. Reopened with `attribution_dagster.core.formats.
    flight_recorder.read_dump` (a restricted unpickler), never with plain pickle."""

    type: Literal["dump"] = "dump"
    path: str
    pg: str | None = None
    seq: int | None = None

    def render(self) -> str:
        if self.pg is None:
            return self.path
        return f"{self.path}:pg {self.pg}" + (f" seq {self.seq}" if self.seq is not None else "")

    @property
    def stream(self) -> str:
        return self.path

    @property
    def position(self) -> int | None:
        return self.seq


Locator = Annotated[
    FileLine | QueryAt | KubeObject | SearchHit | DumpEntry | Note, Field(discriminator="type")
]
"""Where a record, sample or observation can be reopened (a pydantic discriminated union)."""


def _as_locator(data: Any) -> Any:
    """Model input with a bare-text `locator` wrapped as a Note (never parsed: text given for
    a line no source read, in examples and tests, stays opaque)."""
    if isinstance(data, dict) and isinstance(data.get("locator"), str):
        return {**data, "locator": Note(text=data["locator"])}
    return data

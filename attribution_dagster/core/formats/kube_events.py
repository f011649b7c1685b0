"""Kubernetes core/v1 Events as one text line, and back.

An Event reaches the parser catalog in four forms, and all four must give the same
observation (kind, node, attrs):

- from the API (`connectors/pod_logs.py`), rendered here by `render_event`;
- a `kubectl get events` listing (`LAST SEEN  TYPE  REASON  OBJECT  MESSAGE`, with `-o wide`
  adding SUBOBJECT, SOURCE, FIRST SEEN, COUNT, NAME and `-A` a leading NAMESPACE column);
- `kubectl get events -o json` items, either one per line (`jq -c '.items[]'`) or as kubectl
  pretty-prints them (one key per line, keys in alphabetical order);
- the Events table of `kubectl describe` (`Type  Reason  Age  From  Message`).

The rendered line is the column layout of `kubectl get events -A -o wide` (columns separated
by three blanks, as kubectl's tabwriter pads them) with one change: LAST SEEN and FIRST SEEN
hold absolute RFC 3339 times instead of ages, since an age means nothing once stored:

    default   2026-11-20T10:29:40Z   Normal   NodeNotReady   node/gpu-node-12      node-controller
      Node gpu-node-12 status is now: NodeNotReady   2026-11-20T10:29:40Z   1   gpu-node-12.187a3c

(one line; wrapped here). An empty cell (SUBOBJECT above) leaves two gaps side by side.

Times follow kubectl's printer: first seen = firstTimestamp, else eventTime; last seen =
series.lastObservedTime, else lastTimestamp, else first seen; count = series.count, else
count, else 1. An observation's time is the FIRST occurrence (a cause precedes what it
explains; LAST SEEN of a repeated event can be long after).

No Kubernetes client import here: the decoders in rules/ use this module too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

COLUMN_GAP = "   "  # kubectl's tabwriter padding between columns
# components whose event source host is the node the event is about
NODE_LOCAL_REPORTERS = frozenset(
    {"kubelet", "kernel-monitor", "node-problem-detector", "systemd-monitor", "kube-proxy"}
)

_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
# the tail of a wide row: FIRST SEEN, COUNT, NAME (FIRST SEEN absolute in the rendered form)
_WIDE_TAIL = re.compile(
    r"\s{2,40}(?P<first>" + _ISO + r"|<unknown>|\d[\dsmhdy]{0,12})\s{1,40}(?P<count>\d{1,9})"
    r"\s{1,40}(?P<name>[a-z0-9][\w.:-]{0,252})\s*$"
)
_ISO_RX = re.compile(_ISO)


@dataclass(frozen=True)
class EventView:
    """The columns of one Event, from any of its forms. Times are ISO strings as written."""

    namespace: str | None
    name: str | None
    type: str | None
    reason: str | None
    object_kind: str | None  # lower case, as kubectl prints it: node, pod, workload
    object_name: str | None
    subobject: str | None
    component: str | None
    source_host: str | None
    message: str
    first_seen: str | None
    last_seen: str | None
    count: int | None

    @property
    def object(self) -> str | None:
        if not self.object_kind:
            return None
        return f"{self.object_kind}/{self.object_name}" if self.object_name else self.object_kind

    def node_name(self) -> str | None:
        """The name that says which node the event is about: a Node object's name, else the
        host of a node-local reporter (kubelet and node-problem-detector report about their
        own node), else a pod's `namespace/name` (nodes.NodeIndex resolves a pod of the
        context to the node it ran on). A controller's host (`default-scheduler-cp-1`) is
        where the controller runs, not the event's node."""
        if self.object_kind == "node" and self.object_name:
            return self.object_name
        if self.source_host and (self.component or "") in NODE_LOCAL_REPORTERS:
            return self.source_host
        if self.object_kind == "pod" and self.object_name:
            return f"{self.namespace}/{self.object_name}" if self.namespace else self.object_name
        return None

    def attrs(self) -> dict[str, Any]:
        """Observation attrs every event parser sets (not the count: a pretty-printed
        `-o json` item shows it before the line the record starts at)."""
        out: dict[str, Any] = {
            "event_reason": self.reason,
            "event_type": self.type,
            "object": self.object,
            "namespace": self.namespace,
            "source": self.component,
            "first_seen": _normal_iso(self.first_seen),
            "last_seen": _normal_iso(self.last_seen),
        }
        if self.object_kind == "node" and self.object_name:
            out["host"] = self.object_name
        elif self.object_kind == "pod" and self.object_name:
            out["pod"] = self.object_name
        return {k: v for k, v in out.items() if v is not None}


# --- the API / JSON form ---------------------------------------------------------------------


def _get(d: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(d, Mapping):
            return None
        d = d.get(key)
    return d


def _iso(value: Any) -> str | None:
    """An API time (RFC 3339, MicroTime) as written, `Z` for UTC; None when unset."""
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def _normal_iso(value: str | None) -> str | None:
    """An RFC 3339 time as Python writes it (`+00:00`, at most 6 fraction digits), so any
    Python reads it back (`time_from`); other text (an age) is dropped."""
    t = parse_time(value)
    return t.isoformat() if t is not None else None


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 time (`Z`, offset, 0-9 fraction digits) as aware UTC; None otherwise
    (not a string, empty, or other text). The one reader of API times: Kubernetes objects,
    Kueue workloads, search documents."""
    if not value or not isinstance(value, str) or not _ISO_RX.fullmatch(value.strip()):
        return None
    text = value.strip().replace("Z", "+00:00")
    main, dot, rest = text.partition(".")
    if dot:  # Python < 3.11 takes at most 6 fraction digits
        digits = re.match(r"\d+", rest)
        frac = digits.group(0) if digits else ""
        text = f"{main}.{frac[:6].ljust(6, '0')}{rest[len(frac):]}"
    try:
        return datetime.fromisoformat(text).astimezone(timezone.utc)
    except ValueError:
        return None


def view_of(event: Mapping[str, Any]) -> EventView:
    """The columns of an Event object: core/v1 (the API, `kubectl get events -o json`) or
    events.k8s.io/v1 (`regarding`, `note`, `deprecated*`, `reportingController`), as
    kubectl's printer reads them."""
    first = (
        _iso(event.get("firstTimestamp"))
        or _iso(event.get("deprecatedFirstTimestamp"))
        or _iso(event.get("eventTime"))
    )
    last = _iso(event.get("lastTimestamp")) or _iso(event.get("deprecatedLastTimestamp")) or first
    count = event.get("count", event.get("deprecatedCount"))
    series = event.get("series")
    if isinstance(series, Mapping):
        last = _iso(series.get("lastObservedTime")) or last
        count = series.get("count", count)
    if not isinstance(count, int) or count <= 0:
        count = 1
    obj = event.get("involvedObject") or event.get("regarding") or {}
    source = event.get("source") or event.get("deprecatedSource") or {}
    kind = _get(obj, "kind")
    reporter = event.get("reportingComponent") or event.get("reportingController")
    return EventView(
        namespace=_get(event, "metadata", "namespace") or _get(obj, "namespace"),
        name=_get(event, "metadata", "name"),
        type=event.get("type"),
        reason=event.get("reason"),
        object_kind=kind.lower() if isinstance(kind, str) and kind else None,
        object_name=_get(obj, "name") or None,
        subobject=_get(obj, "fieldPath") or None,
        component=_get(source, "component") or reporter or None,
        source_host=_get(source, "host") or event.get("reportingInstance") or None,
        message=" ".join(str(event.get("message") or event.get("note") or "").split()),
        first_seen=first,
        last_seen=last,
        count=count,
    )


def event_time(event: Mapping[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(first, last) occurrence of an Event as aware datetimes."""
    v = view_of(event)
    first, last = parse_time(v.first_seen), parse_time(v.last_seen)
    return first or last, last or first


def render(v: EventView) -> str:
    """One line in the `kubectl get events -A -o wide` layout with absolute times."""
    source = v.component or ""
    if v.source_host:
        source = f"{source}, {v.source_host}" if source else v.source_host
    cells = [
        v.namespace or "",
        v.last_seen or "<unknown>",
        v.type or "",
        v.reason or "",
        v.object or "",
        v.subobject or "",
        source,
        v.message,
        v.first_seen or "<unknown>",
        str(v.count or 1),
        v.name or "",
    ]
    return COLUMN_GAP.join(cells)


def render_event(event: Mapping[str, Any]) -> str:
    return render(view_of(event))


# --- the text forms ----------------------------------------------------------------------------


def view_of_row(groups: Mapping[str, str | None]) -> EventView:
    """The columns of a table row matched by the catalog's event regex (named groups
    ls, etype, ereason, okind, oname, sub, comp, shost, msg)."""
    msg = (groups.get("msg") or "").strip()
    first = name = None
    count: int | None = None
    tail = _WIDE_TAIL.search(msg) if groups.get("okind") else None
    if tail is not None:
        msg = msg[: tail.start()].rstrip()
        first = tail.group("first") if _ISO_RX.fullmatch(tail.group("first")) else None
        count, name = int(tail.group("count")), tail.group("name")
    last = groups.get("ls")
    return EventView(
        namespace=groups.get("ns"),
        name=name,
        type=groups.get("etype"),
        reason=groups.get("ereason"),
        object_kind=groups.get("okind"),
        object_name=groups.get("oname"),
        subobject=groups.get("sub"),
        component=groups.get("comp"),
        source_host=groups.get("shost"),
        message=msg,
        first_seen=first or last,
        last_seen=last,
        count=count,
    )


_JSON_START = re.compile(r'"eventTime"\s?:')


def view_of_json_text(text: str) -> EventView | None:
    """An Event from a JSON text: a whole object on the first line (`jq -c '.items[]'`), or
    kubectl's pretty-printed item read from its `"eventTime":` line on. kubectl prints keys in
    alphabetical order, so only `apiVersion` and `count` come before that line: the item is
    read whole except its count. None when the text holds no readable Event."""
    first_line = text.split("\n", 1)[0].strip().rstrip(",")
    if first_line.startswith("{"):
        try:
            obj = json.loads(first_line)
        except ValueError:
            obj = None
        if isinstance(obj, Mapping) and ("involvedObject" in obj or "regarding" in obj):
            return view_of(obj)
    m = _JSON_START.search(text)
    if m is None:
        return None
    fragment = "{" + text[m.start() :]
    try:
        obj, _ = json.JSONDecoder().raw_decode(fragment)
    except ValueError:
        obj = _salvage(fragment)
    if not isinstance(obj, Mapping) or not obj.get("reason"):
        return None
    if "involvedObject" not in obj and "regarding" not in obj:
        return None
    return view_of(obj)


_KEY = re.compile(r'^\s{0,40}"(?P<k>\w+)":\s?"(?P<v>(?:[^"\\]|\\.){0,4000})",?\s*$')
_OPEN = re.compile(r'^\s{0,40}"(?P<k>\w+)":\s?[\[{]\s*$')


def _salvage(fragment: str) -> dict[str, Any] | None:
    """A pretty-printed item longer than the record's continuation lines: its string keys,
    top level and one level down (involvedObject, metadata, source, series), line by line."""
    out: dict[str, Any] = {}
    section: str | None = None
    depth = 1
    for line in fragment.split("\n")[1:]:
        opened = _OPEN.match(line)
        if opened:
            depth += 1
            if depth == 2:
                section = opened.group("k")
                out.setdefault(section, {})
            continue
        if line.strip().startswith(("}", "]")):
            depth -= 1
            if depth <= 1:
                section = None
            if depth <= 0:
                break  # the item ended
            continue
        kv = _KEY.match(line)
        if kv is None or depth > 2:
            continue
        try:
            value = json.loads(f'"{kv.group("v")}"')
        except ValueError:
            value = kv.group("v")
        target = out[section] if section else out
        if isinstance(target, dict):
            target.setdefault(kv.group("k"), value)
    return out or None

"""Cluster-level streams of a Loki (`cluster_selectors`): the lines switches and fabric
managers write (UFM, OpenSM, Cumulus / SONiC / Onyx syslog, Fabric Manager) and the
controller's, which name a switch port or a job node but are written by no job node.

The files connector reads them from a case's cluster-level directories
(`logs/<name that is not a job node>/`) and keeps a line when it names a job node or holds
a switch-side anchor (connectors/files/reader.py); the engine maps a switch-side line
through the topology to the job node at the other end of the cable
(rules/engine/switchside.py). Here the same lines come from Loki: per configured selector
one query over the job window,

    {job="ufm"} |~ "NVRM: Xid|Link went down|...|NCCL WARN"

(the same anchors as the nodes' query, paged, chunked and split the same way, capped by
`max_entries_per_query` and `max_line_bytes`), and each line is kept by the files rule,
as a record on `CLUSTER_NODE` (a stream whose node label is a job node stays that node's).
A failed cluster read (a 500 or a timeout after the retries, a refused selector) leaves
the nodes' lines and the liveness reads as they are: the coverage turns `partial` and
names the selector. A mixin of LokiClient, which provides `config`, `_chunks`, `_drain`
and `query_text`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from urllib.parse import quote_plus

from attribution_dagster.connectors.loki.config import LokiKeys
from attribution_dagster.connectors.loki.query import line_filter
from attribution_dagster.connectors.loki.state import Fetch, Unit


def cluster_query(selector: str, anchors: Sequence[str]) -> str:
    """`{job="ufm"} |~ "a|b"`: a cluster-level selector and the anchors' line filter."""
    return f"{selector} {line_filter(anchors)}" if anchors else selector


class ClusterStreams:
    """The cluster-level reads of LokiClient (see the module docstring)."""

    config: LokiKeys

    def _run_cluster(self, st: Fetch, literals: tuple[str, ...], start: int, end: int) -> None:
        """One query per `cluster_selectors` item over the window (split when too long)."""
        if not self.config.pushdown:
            literals = ()
        queue: deque[Unit] = deque()
        for selector in self.config.cluster_stream_selectors():
            for part in self._cluster_plan(selector, literals):
                unit = Unit((), part, start, end, selector=selector)
                queue.extend(self._chunks(st, unit))
        self._drain(st, queue, soft=True)

    def _cluster_plan(self, selector: str, anchors: tuple[str, ...]) -> list[tuple[str, ...]]:
        """Anchor groups whose queries fit `max_query_bytes` (halved until they do)."""
        text = cluster_query(selector, anchors)
        if len(anchors) <= 1 or len(quote_plus(text)) <= self.config.max_query_bytes:
            return [anchors]
        h = len(anchors) // 2
        first, rest = anchors[:h], anchors[h:]
        return self._cluster_plan(selector, first) + self._cluster_plan(selector, rest)

    def _unit_query(self, st: Fetch, unit: Unit) -> str:
        if unit.selector:
            return cluster_query(unit.selector, unit.anchors)
        return self.query_text(st, unit.nodes, unit.anchors)

    @staticmethod
    def _what(unit: Unit) -> str:
        """The prefix of a cluster read's errors (the nodes' reads keep theirs bare)."""
        return f"cluster-level streams {unit.selector}: " if unit.selector else ""

    @staticmethod
    def _cluster_keeps(st: Fetch, text: str) -> bool:
        """The files connector's rule for a cluster-level line: kept when it names a job
        node or holds a switch-side anchor; else context only, counted."""
        if any(lit in text for lit in st.switch_side) or st.index.named_in(text):
            return True
        st.cov.context_lines += 1
        return False

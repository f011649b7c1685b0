"""Where each node's Loki streams and its training progress stop (the engine's silence and
progress tests), read without pulling every line: the `count_over_time` liveness queries,
the exact last line of a node gone quiet early, and the last progress lines. A mixin of
LokiClient, which provides `config`, `_call`, `_entries`, `_clean`, `_stream`,
`_line_record` and `query_text`."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from attribution_dagster.connectors.loki.config import MIN_STEP_SECONDS, LokiKeys
from attribution_dagster.connectors.loki.query import (
    NS,
    QUERY_RANGE,
    from_ns,
    line_filter,
    locator,
    logql_string,
    stream_selector,
    to_ns,
)
from attribution_dagster.connectors.loki.state import Entry, Fatal, Fetch, Shrink
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.locators import QueryAt

LIVENESS_POINTS = 250  # liveness buckets per window


class Liveness:
    """The liveness reads of one fetch (see the module docstring)."""

    config: LokiKeys

    def _liveness(
        self, st: Fetch, nodes: tuple[str, ...], progress: tuple[str, ...], start: int, end: int
    ) -> None:
        """Silence and progress without pulling every line (the files connector reads whole
        files and learns both on the way; a pushed-down query only sees anchor lines).

        1. `sum by (<node label>, <stream labels>) (count_over_time({<nodes>}[<step>]))`: per
           stream of each node, the last bucket holding lines. It becomes that stream's
           `last_of_file` record (LogBatch `tails`, like the files connector's last
           timed line of a file), timed as the interval the bucket covers: `time` its start,
           `time_latest` its end, quality `inherited` (written somewhere in between).
        2. The same with the progress anchors as `|~` filter, by node: the last bucket with a
           progress line. Nodes whose last progress fell in the same bucket are read together
           with one backward query over that bucket (`limit` = the lines the count found), so
           the last progress lines come back whatever the other nodes logged later; they go to
           LogBatch `progress` like the files connector's last progress line of a file.

        A failed liveness query leaves the candidate lines as they are: its error makes the
        coverage partial."""
        step = self._step_ns(end - start)
        points = max(1, -(-(end - start) // step))
        first, last = start + step, start + points * step  # bucket k covers (t - step, t]
        tails = self._buckets(st, nodes, (), "tails", first, last, step)
        for labels, t, count, query in tails or []:
            node = st.index.resolve(labels.get(self.config.node_label))
            if node is None:
                continue
            st.streams_nodes.add(node)  # it has logs in the window, anchor lines or not
            st.tail_selectors.append(self._series_selector(labels))
            st.tails.append(
                RawRecord(
                    source="loki",
                    node=node,
                    locator=QueryAt(language="logql", query=query, at_ns=t),
                    time=from_ns(t - step),
                    time_quality="inherited",
                    time_latest=from_ns(t),
                    text=(
                        f"{count} line(s) of {stream_selector(labels)} in the "
                        f"{step // NS} s up to {from_ns(t).strftime('%H:%M:%S')}: its last "
                        "lines in the window (count_over_time)"
                    ),
                    stream=self._stream(labels),
                    last_of_file=True,
                )
            )
        self._exact_tails(st, step)
        if not progress or not self.config.pushdown:
            return
        found = self._buckets(st, nodes, progress, "progress", first, last, step)
        if found:
            self._last_progress(st, found, progress, step)

    def _exact_tails(self, st: Fetch, step: int) -> None:
        """A node whose every stream stopped at least two buckets before most other nodes'
        (a silence candidate) gets its latest stream's real last line: one backward read of
        that bucket, `limit` 1. The tail becomes that exact line (time, text, locator), so
        the evidence of a silence is the line the node wrote last. A healthy job, where all
        nodes log to the end, costs nothing here."""
        by_node: dict[str, int] = {}
        for i, rec in enumerate(st.tails):
            j = by_node.get(rec.node)
            if j is None or rec.time_latest > st.tails[j].time_latest:  # type: ignore[operator]
                by_node[rec.node] = i
        ends = {n: to_ns(st.tails[i].time_latest) for n, i in by_node.items()}  # type: ignore[arg-type]
        if len(ends) < 2:
            return
        early = []
        for node, t in ends.items():
            others = sorted(v for n, v in ends.items() if n != node)
            if t + 2 * step <= others[(len(others) - 1) // 2]:  # median_low of the others
                early.append((t, node))
        for _, node in sorted(early)[: self.config.max_progress_queries]:
            i = by_node[node]
            rec = st.tails[i]
            t = to_ns(rec.time_latest)  # type: ignore[arg-type]
            selector = st.tail_selectors[i]
            entries = self._backward(st, selector, t, step, 1, f"last line of {node}")
            if not entries:
                continue
            labels, _, ts, line = max(entries, key=lambda e: e[2])
            st.tails[i] = rec.model_copy(
                update={
                    "locator": locator(labels, ts),
                    "time": from_ns(ts),
                    "time_quality": "exact",
                    "time_latest": None,
                    "text": self._clean(line.split("\n", 1)[0], st),
                }
            )

    def _step_ns(self, span_ns: int) -> int:
        """The liveness bucket: configured, else window / LIVENESS_POINTS, at least
        MIN_STEP_SECONDS, in whole seconds (a LogQL range like `[29s]`)."""
        seconds = self.config.liveness_step_seconds or max(
            MIN_STEP_SECONDS, span_ns / NS / LIVENESS_POINTS
        )
        return max(1, int(-(-seconds // 1))) * NS

    def _count_query(
        self, st: Fetch, nodes: Sequence[str], literals: Sequence[str], step: int
    ) -> str:
        labels = [self.config.node_label]
        if not literals:  # per stream: like with like (a quiet kern.log is not a silent node)
            labels += [n for n in self.config.stream_labels if n != self.config.node_label]
        inner = self.query_text(st, nodes, literals)
        return f"sum by ({', '.join(labels)}) (count_over_time({inner} [{step // NS}s]))"

    def _series_selector(self, labels: Mapping[str, str]) -> str:
        """One series' exact labels and the configured matchers, as a stream selector."""
        body = [f"{k}={logql_string(v)}" for k, v in sorted(labels.items())]
        body += self.config.matchers()
        return "{" + ", ".join(body) + "}"

    def _series_query(self, labels: Mapping[str, str], literals: Sequence[str], step: int) -> str:
        """A reopenable query of one series: its exact labels and the configured matchers."""
        inner = self._series_selector(labels)
        if literals:
            inner += " " + line_filter(literals)
        return f"count_over_time({inner} [{step // NS}s])"

    def _buckets(
        self,
        st: Fetch,
        nodes: tuple[str, ...],
        literals: tuple[str, ...],
        what: str,
        first: int,
        last: int,
        step: int,
    ) -> list[tuple[dict[str, str], int, int, str]] | None:
        """(series labels, last bucket end with lines, its count, the series' own query) per
        series of the count query; None when the query failed (the error is in coverage).
        Loki's series limit splits the nodes; its range limit cuts the time in chunks."""
        last_of: dict[tuple[tuple[str, str], ...], tuple[int, int]] = {}
        queue: deque[tuple[tuple[str, ...], int, int]] = deque([(nodes, first, last)])
        while queue:
            part, lo, hi = queue.popleft()
            params: list[tuple[str, str | int]] = [
                ("query", self._count_query(st, part, literals, step)),
                ("start", lo),
                ("end", hi),
                ("step", f"{step // NS}s"),
            ]
            try:
                data = self._call(st, QUERY_RANGE, params)
                series = self._matrix(data)
            except Shrink as exc:
                more = self._split_buckets(part, lo, hi, step, exc)
                if more is None:
                    st.cov.errors.append(f"{what} query (liveness): {exc}")
                    return None
                queue.extendleft(reversed(more))
                continue
            except Fatal as exc:
                st.cov.errors.append(f"{what} query (liveness): {exc}")
                st.cov.retryable = st.cov.retryable or exc.transient
                return None
            st.ok_queries += 1
            for labels, values in series:
                key = tuple(sorted(labels.items()))
                for t, count in values:
                    if count > 0 and t >= last_of.get(key, (-1, 0))[0]:
                        last_of[key] = (t, count)
        return [
            (dict(key), t, count, self._series_query(dict(key), literals, step))
            for key, (t, count) in sorted(last_of.items())
        ]

    @staticmethod
    def _split_buckets(
        nodes: tuple[str, ...], lo: int, hi: int, step: int, exc: Shrink
    ) -> list[tuple[tuple[str, ...], int, int]] | None:
        if exc.kind == "series" and len(nodes) > 1:
            h = len(nodes) // 2
            return [(nodes[:h], lo, hi), (nodes[h:], lo, hi)]
        if exc.kind in ("range", "volume") and hi - lo >= 2 * step:
            span = exc.value if exc.kind == "range" and exc.value else (hi - lo) // 2
            n = max(1, min((hi - lo) // step // 2, span // step - 1))  # buckets per chunk
            out = []
            t = lo
            while t <= hi:
                out.append((nodes, t, min(hi, t + (n - 1) * step)))
                t += n * step
            return out
        return None

    def _matrix(self, data: Any) -> list[tuple[dict[str, str], list[tuple[int, int]]]]:
        """(labels, [(ns, value)]) of a `matrix` result (float seconds, value strings)."""
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            what = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise Fatal(f"loki at {self.config.url} answered a {what!r} result, not a matrix")
        out = []
        try:
            for item in data.get("result") or []:
                labels = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
                values = [
                    (round(float(v[0]) * 1000) * 1_000_000, int(float(v[1])))
                    for v in item.get("values") or []
                ]
                out.append((labels, values))
        except (AttributeError, TypeError, ValueError, IndexError, KeyError):
            raise Fatal(
                f"loki at {self.config.url} answered a matrix in an unknown shape"
            ) from None
        return out

    def _last_progress(
        self,
        st: Fetch,
        found: list[tuple[dict[str, str], int, int, str]],
        literals: tuple[str, ...],
        step: int,
    ) -> None:
        """Read the last progress lines: per bucket, one backward query for the nodes whose
        last progress fell in it, `limit` = their count there (more than a page: split)."""
        per_bucket: dict[int, dict[str, int]] = {}
        for labels, t, count, _ in found:
            node = st.index.resolve(labels.get(self.config.node_label))
            if node is not None:
                group = per_bucket.setdefault(t, {})
                group[node] = group.get(node, 0) + count
        reads: list[tuple[int, tuple[str, ...], int]] = []
        for t, group in sorted(per_bucket.items(), reverse=True):
            batch: list[str] = []
            total = 0
            for node, count in sorted(group.items()):
                if batch and total + count > st.limit:
                    reads.append((t, tuple(batch), total))
                    batch, total = [], 0
                batch.append(node)
                total += count
            reads.append((t, tuple(batch), min(total, st.limit)))
        skipped = reads[self.config.max_progress_queries :]
        for t, group_nodes, limit in reads[: self.config.max_progress_queries]:
            query = self.query_text(st, group_nodes, literals)
            entries = self._backward(st, query, t, step, limit, "last progress lines")
            for labels, _, ts, line in entries or []:
                node = st.index.resolve(labels.get(self.config.node_label))
                if node is None:
                    continue
                first = self._clean(line.split("\n", 1)[0], st)
                st.progress.append(self._line_record(node, labels, ts, first))
        if skipped:
            n = sum(len(g) for _, g, _ in skipped)
            st.cov.errors.append(
                f"last progress lines of {n} node(s) not read "
                f"(max_progress_queries={self.config.max_progress_queries})"
            )


    def _backward(
        self, st: Fetch, query: str, t: int, step: int, limit: int, what: str
    ) -> list[Entry] | None:
        """The newest `limit` lines of `query` in the bucket ending at `t` (ns), or None with
        the error in coverage (liveness reads never fail the fetch)."""
        params: list[tuple[str, str | int]] = [
            ("query", query),
            ("direction", "backward"),
            ("start", t - step),  # both bucket ends: Loki's range is (t - step, t]
            ("end", t + 1),
            ("limit", limit),
        ]
        try:
            entries = self._entries(self._call(st, QUERY_RANGE, params), st)
        except (Fatal, Shrink) as exc:
            st.cov.errors.append(f"{what} (liveness): {exc}")
            st.cov.retryable = st.cov.retryable or getattr(exc, "transient", False)
            return None
        st.ok_queries += 1
        return entries


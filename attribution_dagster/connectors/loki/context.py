"""Continuation lines of a Loki hit: an anchor with `context_after` (torchrun's
ChildFailedError block) cannot be pushed down, so for such a hit a second narrow query
reads the same stream, unfiltered, from the hit's timestamp for `context_seconds`, and the
lines after the hit are appended; one read serves the later hits of the stream it covers
(at most `max_context_queries` reads; beyond that a record keeps its first line only, and
the coverage says so). A mixin of LokiClient, which provides `config`, `_call`,
`_entries` and `_clean`."""

from __future__ import annotations

from attribution_dagster.connectors.loki.config import LokiKeys
from attribution_dagster.connectors.loki.query import NS, QUERY_RANGE, locator, stream_selector
from attribution_dagster.connectors.loki.state import Fatal, Fetch, Hit, Shrink, lines_after


class ContinuationReads:
    """The continuation-line reads of LokiClient (see the module docstring)."""

    config: LokiKeys

    def _fill_context(self, st: Fetch, window_end: int) -> None:
        """For hits whose anchor wants following lines: read the stream after the hit.
        One read serves every later hit of the same stream it already covers (a traceback
        naming ChildFailedError twice costs one query)."""
        cfg = self.config
        queries = 0
        skipped = 0
        # per stream: the last read and whether it ended before its limit (then it holds
        # every line of the stream up to its end, enough for a later hit inside it)
        reads: dict[tuple[tuple[str, str], ...], tuple[list[tuple[int, str]], bool]] = {}
        for hit in sorted(st.hits, key=lambda h: h.ts):
            key = tuple(sorted(hit.labels.items()))
            entries, complete = reads.get(key, ([], False))
            after = lines_after(entries, hit)
            if after is None or (len(after) < hit.want and not complete):
                if queries >= cfg.max_context_queries:
                    skipped += 1
                    continue
                queries += 1
                got = self._context_read(st, hit, window_end)
                if got is None:
                    continue
                reads[key] = got
                after = lines_after(got[0], hit) or []
            more = [self._clean(p, st) for p in after[: hit.want]]
            if more:
                rec = st.records[hit.record_index]
                st.records[hit.record_index] = rec.model_copy(
                    update={"text": rec.text + "\n" + "\n".join(more)}
                )
        if skipped:
            st.cov.errors.append(
                f"{skipped} hit(s) kept without their continuation lines "
                f"(max_context_queries={cfg.max_context_queries})"
            )

    def _context_read(
        self, st: Fetch, hit: Hit, window_end: int
    ) -> tuple[list[tuple[int, str]], bool] | None:
        """(ts, line) of the hit's stream, unfiltered, from the hit for context_seconds, and
        whether the read was complete (fewer entries than its limit)."""
        end = min(window_end, hit.ts + int(self.config.context_seconds * NS))
        params: list[tuple[str, str | int]] = [
            ("query", stream_selector(hit.labels)),
            ("direction", "forward"),
            ("start", hit.ts),
            ("end", max(end, hit.ts + 1)),
            ("limit", min(st.limit, hit.want + 100)),
        ]
        try:
            entries = self._entries(self._call(st, QUERY_RANGE, params), st)
        except (Fatal, Shrink) as exc:
            st.cov.errors.append(f"continuation lines of {locator(hit.labels, hit.ts)}: {exc}")
            return None
        st.ok_queries += 1
        limit = int(params[-1][1])
        ordered = sorted(((e[2], e[3]) for e in entries), key=lambda e: e[0])
        return ordered, len(entries) < limit

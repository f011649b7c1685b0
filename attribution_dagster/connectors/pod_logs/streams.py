"""Reading container logs: one streamed, timestamped read per container (and its previous
instance), scanned for anchor lines, continuation lines, where the log ends and its last
progress line. A mixin of PodLogsClient, which provides `api`, `config`, `name`, `_now`
and `_fail`."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from attribution_dagster.connectors.pod_logs.state import (
    KUBELET_TS,
    Ends,
    Matcher,
    Pod,
    Run,
    api_error,
    close_response,
    parse_ts,
    response_lines,
)
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.locators import KubeObject
from attribution_dagster.core.settings import Window


class StreamReads:
    """The container-log reads of PodLogsClient (see the module docstring)."""

    config: Any
    name: str

    @property
    def _timeout(self) -> float:
        return self.config.timeout_seconds

    def _since_seconds(self, window: Window) -> int:
        return max(1, math.ceil((self._now() - window.start).total_seconds()))

    def _read_pod(self, run: Run, pod: Pod, matcher: Matcher) -> None:
        budget = self.config.max_bytes_per_pod
        read_any = False
        for container in pod.containers:
            ends: list[Ends] = []  # previous, then current: kept when the current one ended
            for previous in ([True, False] if self.config.previous else [False]):
                if budget <= 0:
                    run.error(
                        f"pod {pod.ref}: log read stopped at max_bytes_per_pod "
                        f"({self.config.max_bytes_per_pod} bytes); container {container}"
                        f"{' (previous)' if previous else ''} not read"
                    )
                    continue
                got = self._read_stream(run, pod, container, previous, budget, matcher, ends)
                if got is None:  # the pod is gone or the API refused: stop with this pod
                    return
                if got >= 0:
                    read_any = True
                    budget -= got
            current_whole = bool(ends) and not ends[-1].previous  # the current log: whole
            if current_whole:  # where each of the container's logs stops (engine: liveness)
                for e in ends:
                    if e.tail is not None:
                        run.tails.append(e.tail)
                    if e.progress is not None:
                        run.progress.append(e.progress)
        if read_any:
            run.cov.pods_read.append(pod.ref)
        elif pod.ref not in run.cov.pods_missing:
            run.cov.pods_missing.append(pod.ref)

    def _read_stream(
        self, run: Run, pod: Pod, container: str, previous: bool, budget: int,
        matcher: Matcher, ends: list[Ends],
    ) -> int | None:
        """Bytes read from one container log (-1: nothing to read there; None: stop this pod).
        A log read to its end appends where it stops to `ends`."""
        what = f"logs of pod {pod.ref} container {container}" + (" (previous)" if previous else "")
        run.cov.queries += 1
        try:
            resp = self.api.read_namespaced_pod_log(
                pod.name,
                pod.namespace,
                container=container,
                previous=previous,
                timestamps=True,
                since_seconds=self._since_seconds(run.window),
                limit_bytes=budget,
                _preload_content=False,
                _request_timeout=self._timeout,
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes coverage
            status, message = api_error(exc)
            if status == 400 and "previous terminated container" in message:
                run.ok_queries += 1
                return -1  # the container never restarted: no previous log
            if status == 404:
                run.ok_queries += 1
                run.error(f"pod {pod.ref} no longer exists (404): its logs are gone")
                if pod.ref not in run.cov.pods_missing:
                    run.cov.pods_missing.append(pod.ref)
                return None
            self._fail(run, what, exc, pod=pod.ref)
            return None if status in (401, 403) else -1
        run.ok_queries += 1
        got, stopped, end = self._scan_stream(run, resp, pod, container, previous, matcher, what)
        if got >= budget and not stopped:
            run.error(
                f"pod {pod.ref} container {container}{' (previous)' if previous else ''}: "
                f"log cut at max_bytes_per_pod ({self.config.max_bytes_per_pod} bytes); "
                "later lines not read, where it stops is not known"
            )
        elif end is not None:  # read to its end (or past the window): where it stops is known
            ends.append(end)
        run.cov.files += 1
        return got

    def _scan_stream(
        self, run: Run, resp: Any, pod: Pod, container: str, previous: bool,
        matcher: Matcher, what: str,
    ) -> tuple[int, bool, Ends | None]:
        """(bytes read, stopped early because a line was past the window end, where the log
        stops: its last timed line and last progress line; None when the stream broke)."""
        # Long on purpose: one pass over a streamed container log (a per-line loop, like the
        # file scanner)
        # Over 80 lines on purpose: one pass over a streamed response whose per-line state
        # (byte budget, pending continuation lines, last timed and progress line, the window
        # edge) changes together; split into helpers, each would take and return all of it.
        cov, window = run.cov, run.window
        def where(field: str) -> KubeObject:  # this container log's line at `field`
            return KubeObject(
                kind="pod_log", namespace=pod.namespace, name=pod.name, container=container,
                previous=previous, field=field,
            )  # fmt: skip

        recs: list[dict[str, Any]] = []  # RawRecord fields; continuation lines still come
        pending: list[list[Any]] = []  # [record fields, lines still wanted]
        got, stopped, lineno = 0, False, 0
        # the last timed line and the last progress line: (stamp, time, text); one each
        tail: tuple[str, datetime, str] | None = None
        prog: tuple[str | None, datetime | None, str, int] | None = None
        broken = False
        try:
            for raw in response_lines(resp):
                got += len(raw) + 1
                lineno += 1
                cov.lines += 1
                if len(raw) > self.config.max_line_bytes:
                    cov.overlong_lines += 1
                    raw = raw[: self.config.max_line_bytes]
                m = KUBELET_TS.match(raw)
                stamp = m.group(1).decode() if m else None
                body = raw[m.end() :] if m else raw
                try:
                    text = body.decode("utf-8")
                except UnicodeDecodeError:
                    cov.invalid_utf8_lines += 1
                    text = body.decode("utf-8", "replace")
                text = text.rstrip("\r")
                when = parse_ts(stamp)
                if when is not None:
                    tail = (stamp, when, text)  # type: ignore[assignment]
                if matcher.progress(text):
                    prog = (stamp, when, text, lineno)
                if pending:
                    for item in pending:
                        item[0]["text"] += "\n" + text
                        item[1] -= 1
                    pending = [p for p in pending if p[1] > 0]
                if when is not None and when > window.end:
                    cov.out_of_window += 1  # and everything after it: stop reading
                    stopped = True
                    break
                if when is not None and when < window.start:
                    cov.out_of_window += 1
                    continue
                if not matcher.hit(text):
                    continue
                rec = {
                    "source": self.name,
                    "node": pod.node,
                    "locator": where(stamp or f"line {lineno}"),
                    "time": when,
                    "time_quality": "exact" if when is not None else "unknown",
                    "text": text,
                    "stream": container,
                }
                recs.append(rec)
                need = matcher.context_after(text)
                if need:
                    pending.append([rec, need])
        except Exception as exc:  # noqa: BLE001 - a stream cut midway keeps what it gave
            self._fail(run, what + " (stream cut)", exc, pod=pod.ref)
            broken = True
        finally:
            close_response(resp)
            cov.bytes += got
        run.records.extend(RawRecord(**rec) for rec in recs)
        cov.records += len(recs)
        if broken:
            return got, stopped, None
        end = Ends(previous=previous)
        if tail is not None:
            stamp, when, text = tail
            end.tail = RawRecord(
                source=self.name, node=pod.node, locator=where(stamp), time=when,
                text=text, stream=container, last_of_file=True,
            )  # fmt: skip
        if prog is not None:
            stamp, when, text, at = prog
            end.progress = RawRecord(
                source=self.name, node=pod.node, locator=where(stamp or f"line {at}"),
                time=when, time_quality="exact" if when is not None else "unknown",
                text=text, stream=container,
            )  # fmt: skip
        return got, stopped, end

    # -- events ---------------------------------------------------------------------------

"""The parser catalog: prefiltered log lines and metric samples -> typed Observations.

Parsers are data (`parsers.yaml`): each names its observation kind, the case-sensitive anchor
literals the scanners prefilter on, a regex with named groups, how groups map onto
Observation fields and attrs, an optional registered decoder (decoders/) for what needs
code, and real-format examples that the test-suite replays. Parsers never decide categories;
the rule engine does, from the kinds and attrs documented in docs/parsers.md.

Matching, per record: the anchors present in the first line (plain `in`) select candidate
parsers; only their regexes run, in catalog order. A parser with a `group` fires only if no
earlier parser of that group fired on the line (so `NCCL WARN ... unhandled system error` is
nccl_system_error, not also nccl_warn). One line yields at most one observation per kind.
Long on purpose (about 600 lines): matching, host resolution and folding are one per-line
path; catalog specs, the matcher, origins and facts already live in their own modules.

Node: the record's node, unless the parser's `node_from` group names a host in ctx.nodes
(srun `error: node-b: task 1`, torchrun `host : node-b`, NCCL `node-b:pid:tid`): then that host,
with attrs.logged_on = the record's node. A line that starts with NCCL's `host:pid:tid [dev]`
prefix moves every observation of it (not only the NCCL parsers') to that host and GPU, and in
a file mixing several hosts, a host-less echo of a host-named line (same parser and time, a few
lines apart) follows it. Launcher prefixes (parsers.yaml `origins`) say where a gathered line
came from: one naming a host (Ray `(Name pid=N, ip=A)`, kubectl `[pod/<pod>/<container>]`)
moves the line's observations like the NCCL prefix; one naming a global rank (torchrun
`[rankN]:`, mpirun `[j,N]<stderr>:`) or an srun task (`N: `) is resolved once all records are
parsed, through the NCCL rank map or the file's task claims (_relabel_by_origin).

Cluster-level lines (record node `nodes.CLUSTER_NODE`: slurmctld.log, Kubernetes events, a
central syslog) come from no job node. Each observation goes to the job node(s) the parser's
`node_from` group names (a Slurm hostlist `cn-[0410-0411]` gives one observation per job node
in it), else the NCCL origin host, else every job node the line names at all
(`NodeIndex.named_in`); a line naming no job node gives nothing (it is context only), except
a `switch_side` parser's (OpenSM, UFM, switch syslog: it names a switch port or a port GUID):
that observation stays on `*cluster*` and the engine maps it through the cluster's topology
to the job node cabled there, or drops it as context. attrs.logged_on is then `*cluster*`.

A traceback line such as `torch.OutOfMemoryError: CUDA out of memory` yields both a
`traceback` (attrs.family cuda_oom) and a `cuda_oom`; rules should treat the pair as one event.

Kubernetes Events (parsers k8s_event_*, one regex for every form an Event is written in:
`kubectl get events` rows, the row the pod_logs connector renders, `kubectl describe` rows and
`-o json` items) name their node in `node_host`: the Node object, else the reporting kubelet's
host, else the pod (a name in ctx.pods resolves to the node it ran on).

Parsers whose regex is anchored at the line start set `strip_prefix` so timestamps, `host
tag[pid]:`, srun `N:` and torchrun `[rankN]:` prefixes are skipped. Regexes see at most
MATCH_MAX characters per line, and prefix quantifiers are bounded, so hostile lines stay cheap.

Attrs by kind (full list with examples: docs/parsers.md):

- xid: mnemonic, subsystem, fatal (True/False/None from the text), event, link, action,
  action_code, previous_action (154), gpc/tpc/sm/detail (13), contained (94/95), pid, process;
  from DCGM: origin=dcgm, metric, value. sxid: fatal, link, switch.
- gpu_lost: how / init / call. gpu_driver_error: what (probe_failed, version_mismatch, ...).
  nvlink_error: link, origin=cuda. nvlink_counter / gpu_ecc_uncorrectable (DCGM): origin,
  metric, value, delta; gpu_ecc_uncorrectable from CUDA: origin=cuda.
- cuda_error: error (illegal_address, misaligned_address, launch_failure, device_assert,
  illegal_instruction, launch_timeout, no_device, devices_unavailable, init_error, unknown,
  other), message.
  cuda_oom: tried, total (gpu field from "GPU N has a total capacity").
- ib_completion_error: status, status_name, vendor_err, opcode, direction, peer_port, host.
  ib_link_down / ib_link_up: driver (logs) or origin=metric, state, previous_state, delta;
  reason=cable_unplugged; from a switch-side line (OpenSM, UFM, Cumulus, SONiC): side=switch,
  origin, switch, switch_guid, switch_port, peer_switch*, host, host_port, host_guid (the
  engine adds the cable's switch / switch_port / host_port once the topology maps it).
  nic_fatal: what / module, status, detail. pcie_aer: severity
  (corrected, nonfatal, fatal), source_device, type. nccl_abort: what. nccl_warn: message.
- collective_timeout: rank, global_rank, pg, seq, op, timeout_ms, ran_ms. watchdog_failure:
  rank, global_rank, seq, failure_detected / thread_terminated / process_down.
- child_failed: host, rank, local_rank, exit_code, pid, signal, signal_name, failed_at,
  failures. process_exit: exit_code, signal, signal_name, how, tasks, local_rank, source_tool.
- traceback: exc_type, message, family (nccl, host_oom, cuda_oom, cuda, io, signal,
  child_failed, app), errno. segfault: process, pid, library.
- host_oom_kill: process, pid, invoker (ray_memory_monitor: killed, address), constraint, task,
  task_pid, victim. cgroup_oom: events, step, pid, process, what=srun_task (tasks, host).
  kernel_panic: what (panic, soft_lockup, hard_lockup, hung_task, mce).
  node_unreachable: host / failed_host / not_responding; from an Event what (not_ready,
  rebooted).
- lustre_error: rc (= code), target, op, nid, event=connection_lost. nfs_error: server.
  io_error: what (buffer_io, block_io, ext4_error, remount_ro, nvme_reset, eio,
  transport_shutdown, xfs_shutdown), device. disk_full: path.
- slurm_cancelled: reason (time_limit, preemption, node_failure, requeue, none), what, id, at,
  by. k8s_oom_killed: exit_code, container. k8s_evicted: reason (node_pressure + resource,
  preempted, taint, eviction_api, pod_gc, kubelet, evicted).
- from a Kubernetes Event, any kind: event_reason, event_type, object, namespace, source,
  first_seen, last_seen, host (Node object) or pod.
- any kind: logged_on when node was taken from a host named in the line.

Run `python -m attribution_dagster.rules.parsers --markdown` to print docs/parsers.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import (
    Anchor,
    MetricFamily,
    MetricSample,
    RawEvidence,
    RawRecord,
)
from attribution_dagster.core.formats import startcache, yamltext
from attribution_dagster.core.hosts import CLUSTER_NODE
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.catalog_specs import (  # noqa: F401 - re-exported
    _FIELD_TYPES,
    _LEAD_STAMP,
    CATALOG_PATH,
    EXCERPT_MAX,
    MATCH_MAX,
    ORIGIN_KEYS,
    AnchorSpec,
    CatalogError,
    ExampleSpec,
    OriginExample,
    OriginSpec,
    ParserSpec,
)
from attribution_dagster.rules.decoders import DECODER_ATTRS
from attribution_dagster.rules.facts import Fact, fold
from attribution_dagster.rules.grouping import FactGrouper
from attribution_dagster.rules.matcher import (  # noqa: F401 - re-exported
    Parser,
    _convert,
    _group,
    _HyperscanDispatch,
    _inline_time,
    _joined,
)
from attribution_dagster.rules.origins import (  # noqa: F401 - re-exported
    _follow_echoes,
    _index,
    _relabel_by_origin,
    _resolve_host,
    _task_ids,
    nccl_origin,
)
from attribution_dagster.rules.parse_metrics import (
    MetricExample,
    MetricNormalizer,
    MetricSpec,
)
from attribution_dagster.rules.vocabulary import vocabulary

_EVENT_TAG = ("event_reason", "event_type", "object", "first_seen")


def _tail_observation(rec: RawRecord) -> Observation:
    """The last timed line of a file, as a `log_last_line` observation (engine: silence)."""
    return Observation(
        kind="log_last_line",
        node=rec.node,
        time=rec.time,
        time_quality=rec.time_quality,
        time_latest=rec.time_latest if rec.time_quality != "exact" else None,
        excerpt=_trim(rec.text),
        source=rec.source,
        locator=rec.locator,
        parser="file_tail",
        attrs={"stream": rec.stream} if rec.stream else {},
    )


def _trim(text: str) -> str:
    text = text.strip()
    return text if len(text) <= EXCERPT_MAX else text[: EXCERPT_MAX - 1] + "…"


def _sort_key(o: Observation) -> tuple[int, float, str, str]:
    if o.time is None:
        return (1, 0.0, o.node, o.locator.render())
    t = o.time if o.time.tzinfo else o.time.replace(tzinfo=timezone.utc)
    return (0, t.timestamp(), o.node, o.locator.render())


def _drain(per_record: list[Any]) -> Iterator[Fact]:
    """The facts of (record, facts) pairs, each pair dropped from the list once read."""
    for i in range(len(per_record)):
        _, facts = per_record[i]
        per_record[i] = None
        yield from facts


def _unnamed(regex: str) -> str:
    """A regex with its named groups made plain, so several can share one alternation."""
    return re.sub(r"\(\?P<\w+>", "(?:", regex)


class ParserCatalog:
    """Compiled parsers plus metric specs; build with load_catalog()."""

    def __init__(
        self,
        parsers: list[ParserSpec],
        metrics: list[MetricSpec],
        noise: list[str],
        origins: list[OriginSpec] | None = None,
        groups: dict[str, list[str]] | None = None,
    ):
        ids = [p.id for p in parsers] + [m.id for m in metrics]
        dupes = {i for i in ids if ids.count(i) > 1}
        if dupes:
            raise CatalogError(f"duplicate parser ids: {sorted(dupes)}")
        for m in metrics:
            for k in (m.kind, m.recover_kind):
                if k is not None and k not in vocabulary().kinds:
                    raise CatalogError(f"metric {m.id}: kind {k!r} is not in kinds.yaml")
        self.parsers = [Parser(p, i, (groups or {}).get(p.regex)) for i, p in enumerate(parsers)]
        self.origin_specs = list(origins or [])
        self._origins = [(o.id, re.compile(o.regex)) for o in self.origin_specs]
        # any prefix at all, tested once before the per-prefix loop: most lines carry none
        self._origin_any = (
            re.compile("|".join(f"(?:{_unnamed(o.regex)})" for o in self.origin_specs))
            if self.origin_specs
            else None
        )
        self.metric_specs = metrics
        self.noise = noise
        self._metrics = MetricNormalizer(metrics)
        by_literal: dict[str, set[int]] = {}
        context: dict[str, int] = {}
        hit: set[str] = set()  # literals some ordinary (not last_only) parser needs as hits
        switch_side: set[str] = set()  # literals of switch-side parsers (kept unnamed)
        for p in self.parsers:
            for a in p.spec.anchors:
                by_literal.setdefault(a.literal, set()).add(p.index)
                context[a.literal] = max(context.get(a.literal, 0), a.context_after)
                if not p.spec.last_only:
                    hit.add(a.literal)
                if p.spec.switch_side:
                    switch_side.add(a.literal)
        self._dispatch = [(lit, tuple(sorted(ix))) for lit, ix in by_literal.items()]
        self._anchors = [
            Anchor(
                literal=lit,
                context_after=context[lit],
                last_only=lit not in hit,
                switch_side=lit in switch_side,
            )
            for lit in by_literal
        ]
        self._hs = _HyperscanDispatch.build([lit for lit, _ in self._dispatch])

    # --- the interface -------------------------------------------------------------------

    def anchors(self, last_only: bool = False) -> list[Anchor]:
        """Union of anchor literals (case-sensitive) the scanners prefilter on; with
        `last_only`, also the literals of which a scanner keeps only each file's last line
        (progress: the local-files scanner finds it near each block end, no extra pass)."""
        return [a for a in self._anchors if last_only or not a.last_only]

    def origin(self, text: str) -> dict[str, Any]:
        """What the launcher prefixes at the start of a line name (`origins` in parsers.yaml):
        {host, rank, task, local_rank} as far as given; several prefixes in a row are read,
        after an optional leading timestamp; where two name the same key the inner one wins."""
        line = text[:512].split("\n", 1)[0]
        pos, found = 0, {}
        probe = self._origin_any
        if probe is None:
            return found
        if probe.match(line) is None:  # the common case: no prefix, at the start or after a stamp
            stamp = _LEAD_STAMP.match(line)
            if stamp is None or probe.match(line, stamp.end()) is None:
                return found
        for attempt in range(2):
            while True:
                for _, rx in self._origins:
                    m = rx.match(line, pos)
                    if m is not None and m.end() > pos:
                        for k, v in m.groupdict().items():
                            if v is not None:
                                found[k] = v if k == "host" else int(v)
                        pos = m.end()
                        break
                else:
                    break
            if found or attempt:
                break
            stamp = _LEAD_STAMP.match(line)
            if stamp is None:
                break
            pos = stamp.end()
        return found

    def grouper(self, ctx: ExecutionContext) -> FactGrouper:
        """Which lines of a file state the same facts (for the files reader's workers)."""
        return FactGrouper(self, ctx)

    def parse_line(self, line: str) -> list[tuple[Parser, dict[str, Any]]]:
        """Matches of one line (first line of a record) in catalog order: (parser, draft)."""
        return self._match(line, line)

    def _event_row_matches(
        self, text: str, found: list[tuple[Parser, dict[str, Any]]]
    ) -> list[tuple[Parser, dict[str, Any]]]:
        """A pretty-printed Event (`kubectl get events -o json`) starts its record at its
        `"eventTime"` line; its message is lines later, where no one-line parser looks. The
        API door renders the same Event as one row, whose message the other parsers do read
        (an OOMKilling quoting the kernel's `Memory cgroup out of memory` is a cgroup_oom
        too). So the row is matched here as well: both doors give the same observations."""
        from attribution_dagster.core.formats.kube_events import render, view_of_json_text

        view = view_of_json_text(text)
        if view is None:
            return []
        row = render(view)
        kinds = {p.spec.kind for p, _ in found}
        extra = []
        for p, draft in self._match(row, row):
            if p.spec.kind in kinds or p.spec.id.startswith("k8s_event"):
                continue
            draft["excerpt"] = draft.get("excerpt") or row
            if not draft.get("node_host") and view.node_name():  # the row names the node
                draft["node_host"] = view.node_name()
            extra.append((p, draft))
        return extra

    def _match(self, line: str, text: str) -> list[tuple[Parser, dict[str, Any]]]:
        cand: set[int] = set()
        found = self._hs.present(line) if self._hs is not None else None
        if found is None:
            for lit, ix in self._dispatch:
                if lit in line:
                    cand.update(ix)
        else:
            for j in found:
                cand.update(self._dispatch[j][1])
        if not cand:
            return []
        out: list[tuple[Parser, dict[str, Any]]] = []
        kinds: set[str] = set()
        groups: set[str] = set()
        stripped: list[str] = []  # the line without prefixes, stripped once for all parsers
        for i in sorted(cand):
            p = self.parsers[i]
            spec = p.spec
            if spec.kind in kinds or (spec.group is not None and spec.group in groups):
                continue
            draft = p.match(line, text, stripped)
            if draft is None:
                continue
            out.append((p, draft))
            kinds.add(spec.kind)
            if spec.group is not None:
                groups.add(spec.group)
        return out

    def parse_record(
        self, rec: RawRecord, ctx: ExecutionContext | None = None
    ) -> list[Observation]:
        """Observations of one record; [] when nothing matches. Never raises on odd text."""
        return [o for f in self.facts(rec, ctx) if (o := f.observation()) is not None]

    def facts(self, rec: RawRecord, ctx: ExecutionContext | None = None) -> list[Fact]:
        """What parse_record returns, as plain Facts (no validation: built once per distinct
        fact by `fold`)."""
        # Long on purpose: the normalizer's per-matched-line path; a call per line costs more
        # than the line, so it stays one frame
        text = rec.text
        line = text.split("\n", 1)[0] if "\n" in text else text
        if len(text) > MATCH_MAX:
            line = line[:MATCH_MAX]
            text = "\n".join(part[:MATCH_MAX] for part in text.split("\n"))
        try:
            matches = self._match(line, text)
            if "\n" in text and any("event_reason" in d["attrs"] for _, d in matches):
                matches += self._event_row_matches(text, matches)
        except Exception:  # regex engine edge cases must not stop an analysis
            return []
        out: list[Fact] = []
        # the line's NCCL origin and launcher prefix, read only when a parser's own host group
        # did not name the node (most matched lines name it: these regexes cost more than it)
        unread: Any = object()
        origin: Any = unread
        launcher_host: Any = unread
        cluster = rec.node == CLUSTER_NODE
        # A Kubernetes Event's line may also match a parser of the message it quotes (an
        # OOMKilling's `Memory cgroup out of memory: Killed process ...` is a cgroup_oom too).
        # Every observation of the line carries the Event's tag: it is the control plane
        # writing about the node, not the node writing (liveness), whichever door and file
        # layout it came through (API, a node's events file, a cluster-level one).
        event = next((d["attrs"] for _, d in matches if "event_reason" in d["attrs"]), None)
        only = rec.only  # a line folded per parser (rules/grouping.py): this record's parts
        for p, draft in matches:
            if only is not None and p.spec.id not in only:
                continue
            attrs = draft["attrs"]
            if event is not None and "event_reason" not in attrs:
                attrs = {**{k: event[k] for k in _EVENT_TAG if k in event}, **attrs}
            node = rec.node
            hosts: list[str] = []
            if ctx is not None and draft.get("node_host"):
                index = _index(ctx)
                # a cluster-level line may name several nodes (`Nodes cn-[0410-0411] ...`)
                hosts = (
                    index.resolve_all(draft["node_host"])
                    if cluster
                    else [h for h in [index.resolve(draft["node_host"])] if h]
                )
            if not hosts and origin is unread:
                origin = nccl_origin(line) if ctx is not None else None
            if not hosts and origin is not None and not p.spec.node_from:
                # a parser without its own host group: the line's NCCL origin names the node
                host = _resolve_host(origin.group("host"), ctx)
                if host is not None:
                    hosts = [host]
                    if draft["fields"].get("gpu") is None:
                        draft["fields"]["gpu"] = int(origin.group("dev"))
            if not hosts and launcher_host is unread:
                launcher_host = self.origin(line).get("host") if ctx is not None else None
            if not hosts and launcher_host and not draft.get("node_host"):
                # a launcher prefix naming the host (Ray `ip=`, kubectl `[pod/<pod>/...]`)
                host = _resolve_host(launcher_host, ctx)
                if host is not None:
                    hosts = [host]
            if not hosts and cluster and ctx is not None:
                # no host group resolved: the job nodes the line names at all
                hosts = _index(ctx).named_in(line)
            if cluster and not hosts and not p.spec.switch_side:
                continue  # a cluster-level line about no node of this job: context only
            # a switch-side line naming no job node stays on CLUSTER_NODE: the engine maps its
            # switch port / port GUID through the topology (rules/engine/switchside.py)
            when, quality = rec.time, rec.time_quality
            latest = rec.time_latest if quality != "exact" else None
            # an Event's every observation is timed like the Event (its first occurrence)
            time_from = p.spec.time_from or ("first_seen" if "event_reason" in attrs else None)
            if time_from and quality != "exact":
                own = _inline_time(attrs.get(time_from), ctx)
                if own is not None:
                    when, quality, latest = own, "exact", None
            for host in hosts or [node]:
                one = attrs
                if host != rec.node:
                    one = {**attrs, "logged_on": rec.node}
                out.append(
                    Fact(
                        p.spec.kind,
                        host,
                        when,
                        quality,
                        latest,
                        _trim(draft.get("excerpt") or line),
                        rec.source,
                        rec.locator,
                        p.spec.id,
                        one,
                        draft["fields"],
                        rec.count,
                        rec.time_last,
                        rec.locator_last,
                    )
                )
        return out

    def normalize_samples(
        self, samples: list[MetricSample], ctx: ExecutionContext | None = None
    ) -> list[Observation]:
        return self._metrics.normalize(samples, ctx)

    def normalize(
        self, raw: RawEvidence, ctx: ExecutionContext, consume: bool = False
    ) -> list[Observation]:
        """All records and samples, time-ordered (unknown last); a line read twice counts once;
        a repeated fact is one observation (`fold`: count, first and last time and locator).
        With `consume`, `raw.records` is emptied once parsed, so each record is freed as its
        facts fold (the caller needs only the observations: peak memory is records or
        observations, not both)."""
        seen: set[tuple[Any, ...]] = set()
        per_record: list[tuple[RawRecord, list[Fact]]] = []
        # where each file stops (liveness, not a parsed event): the engine's silence test
        tails = [_tail_observation(r) for r in raw.tails]
        for r in raw.progress:  # each file's last progress line
            tails.extend(o for o in self.parse_record(r, ctx) if o.kind == "progress")
        for rec in raw.records:
            if rec.last_of_file:
                tails.append(_tail_observation(rec))
                continue
            key = (rec.source, rec.locator.render(), rec.text, rec.only)
            if key in seen:
                continue
            seen.add(key)
            facts = self.facts(rec, ctx)
            if facts:
                per_record.append((rec, facts))
        del seen
        if consume:
            raw.records = []
        echoed = _follow_echoes(_relabel_by_origin(per_record, ctx, self.origin), ctx)
        del per_record  # drained by fold: a fact is freed once folded (peak: facts or obs)
        out = fold(_drain(echoed))
        out.extend(self.normalize_samples(raw.samples, ctx))
        out.extend(tails)
        out.sort(key=_sort_key)
        return out

    def metric_families(self) -> list[MetricFamily]:
        """One family per metric spec: what a metric source reads for the metric parsers
        (a metric no parser consumes could never become an observation)."""
        return [
            MetricFamily(
                id=m.id,
                names=tuple(m.names),
                companions=(m.ratio_of,) if m.ratio_of else (),
                mode=m.mode,
                normal=m.normal,
                steady_after=m.steady_abnormal_after,
            )
            for m in self.metric_specs
        ]

    def describe(self) -> list[dict[str, Any]]:
        """One dict per parser / metric spec, for docs and the CLI."""
        rows: list[dict[str, Any]] = []
        for p in self.parsers:
            s = p.spec
            rows.append(
                {
                    "id": s.id,
                    "type": "log",
                    "kind": s.kind,
                    "description": s.description,
                    "anchors": [
                        a.literal + (f" (+{a.context_after} lines)" if a.context_after else "")
                        for a in s.anchors
                    ],
                    "regex": s.regex,
                    "fields": sorted(s.fields),
                    "attrs": sorted(
                        set(s.attrs)
                        | set(s.const)
                        | set(DECODER_ATTRS.get(s.decoder or "", []))
                        | ({"logged_on"} if s.node_from or s.decoder == "child_failed" else set())
                    ),
                    "decoder": s.decoder,
                    "group": s.group,
                    "examples": [e.model_dump(exclude_defaults=True) for e in s.examples],
                }
            )
        for m in self.metric_specs:
            rows.append(
                {
                    "id": m.id,
                    "type": "metric",
                    "kind": m.kind + (f" / {m.recover_kind}" if m.recover_kind else ""),
                    "description": m.description,
                    "metrics": m.names,
                    "mode": m.mode,
                    "attrs": sorted(set(m.attrs) | _MODE_ATTRS[m.mode]),
                    "examples": [e.model_dump() for e in m.examples],
                }
            )
        return rows

    def metric_example_observations(self, spec: MetricSpec, ex: MetricExample) -> list[Observation]:
        """Replay one metric example as samples one second apart (used by tests and docs)."""
        t0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
        samples = [
            MetricSample(
                source="example",
                node="node-a",
                locator=FileLine(path="example.prom", line=i + 1),
                time=t0 + timedelta(seconds=i),
                name=spec.names[0],
                labels=ex.labels,
                value=v,
            )
            for i, v in enumerate(ex.values)
        ]
        if spec.ratio_of and ex.ratio_values:
            samples += [
                MetricSample(
                    source="example",
                    node="node-a",
                    locator=FileLine(path="example.prom", line=len(ex.values) + i + 1),
                    time=t0 + timedelta(seconds=i),
                    name=spec.ratio_of,
                    labels=ex.labels,
                    value=v,
                )
                for i, v in enumerate(ex.ratio_values)
            ]
        return self.normalize_samples(samples, _example_ctx(["node-a", "node-b", "node-c"]))

    def example_observations(
        self, ex: ExampleSpec, parser_id: str | None = None
    ) -> list[Observation]:
        """Parse one catalog example as the pipeline would (used by tests and docs)."""
        text = "\n".join([ex.line, *ex.context])
        rec = RawRecord(
            source="example",
            node=ex.node,
            locator=FileLine(path="example", line=1),
            time=datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc),
            text=text,
        )
        obs = self.parse_record(rec, _example_ctx(ex.nodes))
        return [o for o in obs if parser_id is None or o.parser == parser_id]


_MODE_ATTRS: dict[str, set[str]] = {
    "last_value": set(),
    "increase": {"delta"},
    "positive": {"delta"},
    "state": {"state", "previous_state"},
    "below": {"percent", "total"},
}


def _example_ctx(nodes: list[str]) -> ExecutionContext:
    return ExecutionContext(
        job_id="example",
        scheduler="static",
        state="FAILED",
        start=datetime(2026, 11, 2, 9, 0, tzinfo=timezone.utc),
        end=datetime(2026, 11, 2, 11, 0, tzinfo=timezone.utc),
        nodes=nodes,
    )


def _read(path: Path, cached: bool) -> ParserCatalog:
    try:
        # libyaml's loader when built in (the catalog is read at every process start); with
        # `cached`, the data parsed and validated by an earlier process (core/formats/startcache.py)
        loaded = startcache.load(path) if cached else None
        data = (
            loaded.data
            if loaded is not None
            else yamltext.safe_load(path.read_text(encoding="utf-8"))
        )
    except (OSError, UnicodeDecodeError, yamltext.YAMLError) as e:
        raise CatalogError(f"{path}: {e}") from e
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping with `parsers:`")
    try:
        parsers = [ParserSpec.model_validate(p) for p in data.get("parsers") or []]
        metrics = [MetricSpec.model_validate(m) for m in data.get("metrics") or []]
    except ValueError as e:
        raise CatalogError(f"{path}: {e}") from e
    try:
        origins = [OriginSpec.model_validate(o) for o in data.get("origins") or []]
    except ValueError as e:
        raise CatalogError(f"{path}: origins: {e}") from e
    # a cached catalog compiled before: its regexes' group names are known, and each regex is
    # compiled when a line first needs it (most of a job's lines meet a few parsers)
    groups = loaded.derived if loaded is not None and loaded.cached else None
    catalog = ParserCatalog(parsers, metrics, list(data.get("noise") or []), origins, groups)
    if loaded is not None:
        startcache.store(loaded, {p.spec.regex: sorted(p.group_names) for p in catalog.parsers})
    return catalog


def load_catalog(path: Path | None = None, cached: bool = False) -> ParserCatalog:
    """Read, validate and compile a parser catalog (default: the packaged parsers.yaml).
    Every call reads afresh and compiles every regex (a bad one: CatalogError); rules/catalog.py
    keeps the one copy a process shares, `cached` (docs/performance.md, "Start-up cost")."""
    return _read(path or CATALOG_PATH, cached)

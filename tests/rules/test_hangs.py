"""Hangs (issue 18): the restricted flight-recorder reader refuses malicious pickles, the
dumps are compared across ranks, and the hang analysis names the straggler or says why not."""

from __future__ import annotations

import os
import pickle
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.formats.flight_recorder import (
    DumpRefused,
    compare,
    from_plain,
    read_dumps,
    safe_loads,
)
from attribution_dagster.core.locators import FileLine
from attribution_dagster.core.observation import Observation
from attribution_dagster.pipeline import analyze_case, collect_evidence, load_context, normalize
from attribution_dagster.rules.engine import hangs

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"


# ---- malicious dumps --------------------------------------------------------------------------


class _System:
    """Unpickling calls os.system(<command>) through __reduce__."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):  # noqa: ANN204
        return (os.system, (self.command,))


class _Evil:
    def __reduce__(self):  # noqa: ANN204
        return (Path.write_text, (Path("/nonexistent"), "x"))


def _marker(tmp_path: Path) -> Path:
    return tmp_path / "pwned"


def test_a_reduce_calling_os_system_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = _marker(tmp_path)
    payload = pickle.dumps({"version": "2.4", "entries": [_System(f"touch {marker}")]})
    with pytest.raises(DumpRefused, match=r"refused global (posix|os|nt)\.system"):
        safe_loads(payload)
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_globals_of_other_modules_are_refused(protocol: int) -> None:
    for obj in (_Evil(), datetime(2026, 1, 1), Path("/etc/passwd"), {"x": _Evil()}):
        with pytest.raises(DumpRefused, match="refused global"):
            safe_loads(pickle.dumps(obj, protocol=protocol))


def test_builtin_containers_and_scalars_are_read() -> None:
    data = {"a": [1, 2.5, None, True], "b": ("x", b"\x00\x01"), "c": {1, 2}, "d": frozenset({3})}
    for protocol in range(0, pickle.HIGHEST_PROTOCOL + 1):
        assert safe_loads(pickle.dumps(data, protocol=protocol)) == data


def test_garbage_is_refused_not_raised() -> None:
    with pytest.raises(DumpRefused):
        safe_loads(b"\x80\x05not a pickle at all")
    with pytest.raises(DumpRefused):
        from_plain(["not", "a", "dict"], "dumps/x", 0, None)


def test_coverage_records_the_refusal_and_the_case_still_runs(tmp_path: Path) -> None:
    """A malicious dump among good ones: nothing runs, coverage says which file was refused,
    and the other dumps still lead to the straggler."""
    case = tmp_path / "case"
    src = SAMPLES / "hang-flight-recorder"
    (case / "dumps").mkdir(parents=True)
    (case / "context.json").write_text((src / "context.json").read_text())
    for p in (src / "logs").rglob("*"):
        if p.is_file():
            dst = case / p.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(p.read_bytes())
    for p in (src / "dumps").iterdir():
        (case / "dumps" / p.name).write_bytes(p.read_bytes())
    marker = _marker(tmp_path)
    (case / "dumps" / "nccl_trace_rank_9").write_bytes(
        pickle.dumps({"version": "2.4", "entries": [], "x": _System(f"touch {marker}")})
    )
    result = analyze_case(case)
    assert not marker.exists()
    cov = next(c for c in result.coverage if c.source == "files:dumps")
    assert cov.status == "partial"
    assert any("nccl_trace_rank_9" in e and "refused global" in e for e in cov.errors)
    assert result.suspect_nodes == ["node-d"]


# ---- comparing dumps --------------------------------------------------------------------------


def _dump(rank: int, enq: int, done: int, ops: dict[int, tuple[str, list, str]] | None = None):
    entries = []
    for seq in range(enq - 3, enq + 1):
        name, sizes, dtype = (ops or {}).get(seq, ("nccl:all_reduce", [[4, 4]], "Float"))
        entries.append({
            "record_id": seq, "pg_id": 0, "collective_seq_id": seq, "profiling_name": name,
            "state": "completed" if seq <= done else "scheduled", "input_sizes": sizes,
            "input_dtypes": [dtype], "time_created_ns": 1_790_000_000_000_000_000 + seq,
            "timeout_ms": 600000,
        })
    return from_plain({
        "version": "2.4",
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_enqueued_collective": enq, "last_started_collective": enq,
                            "last_completed_collective": done}},
        "entries": entries,
    }, f"dumps/nccl_trace_rank_{rank}", rank, None)


def test_compare_finds_the_missing_rank() -> None:
    found = compare([_dump(0, 9, 8), _dump(1, 9, 8), _dump(2, 8, 8), _dump(3, 9, 8)])
    missing = [f for f in found if f.what == "missing"]
    assert [(f.rank, f.seq) for f in missing] == [(2, 9)]


@pytest.mark.parametrize(
    ("odd", "error_type"),
    [
        (("nccl:all_gather", [[4, 4]], "Float"), "COLLECTIVE_TYPE_MISMATCH"),
        (("nccl:all_reduce", [[8, 4]], "Float"), "SIZE_OR_SYNTAX_MISMATCH"),
        (("nccl:all_reduce", [[4, 4]], "BFloat16"), "DTYPE_MISMATCH"),
    ],
)
def test_compare_finds_the_mismatch(odd, error_type) -> None:
    dumps = [_dump(r, 9, 8, {7: odd} if r == 1 else None) for r in range(4)]
    found = [f for f in compare(dumps) if f.what == "mismatch"]
    assert [(f.rank, f.seq, f.error_type) for f in found] == [(1, 7, error_type)]


def test_a_tie_names_no_culprit() -> None:
    dumps = [_dump(r, 9, 8, {7: ("nccl:all_gather", [[4, 4]], "Float")} if r < 2 else None)
             for r in range(4)]
    found = [f for f in compare(dumps) if f.what == "mismatch"]
    assert [(f.rank, f.error_type) for f in found] == [(-1, "UNDECIDED")]


def test_dumps_round_trip_through_export_layout(tmp_path: Path) -> None:
    d = _dump(2, 9, 8)
    (tmp_path / "dumps").mkdir()
    (tmp_path / "dumps" / "nccl_trace_rank_2").write_bytes(pickle.dumps(d.to_plain()))
    again = read_dumps(tmp_path)
    assert again.errors == [] and again.dumps == [d]


# ---- the analysis -----------------------------------------------------------------------------

CTX = ExecutionContext.model_validate({
    "job_id": "1", "scheduler": "static", "state": "FAILED",
    "start": "2026-11-02T10:00:00Z", "end": "2026-11-02T11:00:00Z",
    "nodes": ["n1", "n2", "n3", "n4"],
})
T = datetime(2026, 11, 2, 10, 30, tzinfo=timezone.utc)


def _progress(node: str, rank: int, enq: int, done: int) -> Observation:
    return Observation(
        kind="collective_progress", node=node, time=T + timedelta(seconds=rank),
        attrs={"rank": rank, "global_rank": rank, "pg": 0, "last_enqueued": enq,
               "last_completed": done, "tool": "watchdog"},
        excerpt=f"[Rank {rank}] last enqueued NCCL work: {enq}, last completed NCCL work: {done}",
        source="files", locator=f"logs/{node}/app.log:{rank + 1}",
        parser="torch_collective_progress",
    )


def test_the_rank_behind_is_the_lead() -> None:
    obs = [_progress(f"n{r // 2 + 1}", r, 412 if r != 5 else 411, 411) for r in range(8)]
    hang = hangs.analyze(CTX, obs)
    assert hang.verdict == "leads"
    assert [(x.node, x.rank, x.seq) for x in hang.leads] == [("n3", 5, 412)]


def test_when_all_enqueued_the_lowest_completed_is_the_lead() -> None:
    obs = [_progress(f"n{r // 2 + 1}", r, 412, 411 if r != 6 else 410) for r in range(8)]
    assert [(x.node, x.rank) for x in hangs.analyze(CTX, obs).leads] == [("n4", 6)]


def test_too_many_laggards_name_no_suspect() -> None:
    # ranks 1, 5 and 9 on three different nodes are behind: a job-wide stall, not one rank
    obs = [_progress(f"n{r // 4 + 1}", r, 411 if r in (1, 5, 9) else 412, 411)
           for r in range(16)]
    hang = hangs.analyze(CTX, obs)
    assert hang.leads == [] and hang.verdict == "too_many"
    assert any("too many" in n for n in hang.notes)


def test_conflicting_sources_name_no_suspect() -> None:
    obs = [_progress(f"n{r // 2 + 1}", r, 412 if r != 5 else 411, 411) for r in range(8)]
    obs.append(Observation(
        kind="rank_unreachable", node="n1", gpu=1, time=T, attrs={"pid": 7, "what": "dead"},
        excerpt="Process 7 on node n1 managing GPU 1", source="files",
        locator="logs/n1/ras.txt:3", parser="ncclras_process",
    ))
    hang = hangs.analyze(CTX, obs)
    assert hang.leads == [] and hang.verdict == "conflict"
    assert any("disagree" in n for n in hang.notes)


def test_the_16_node_watchdog_sample_maps_the_straggler_to_its_gpu() -> None:
    case = SAMPLES / "hang-watchdog-16node"
    ctx = load_context(case)
    obs = normalize(collect_evidence(case, ctx), ctx)
    hang = hangs.analyze(ctx, hangs.place(ctx, obs))
    assert [(x.node, x.gpu, x.rank, x.process_group, x.seq) for x in hang.leads] == [
        ("node-11", 5, 85, "0", 412)
    ]


@pytest.mark.parametrize(
    ("sample", "node", "gpu", "rank"),
    [
        ("hang-watchdog-16node", "node-11", 5, 85),
        ("hang-flight-recorder", "node-d", 0, 6),
        ("hang-torchfrtrace", "node-b", 2, 6),
        ("hang-ncclras", "node-c", 5, 21),
    ],
)
def test_each_form_leads_to_its_straggler(sample: str, node: str, gpu: int, rank: int) -> None:
    result = analyze_case(SAMPLES / sample)
    assert result.status == "unattributed"
    assert result.suspect_nodes == [node]
    assert [(x.node, x.gpu, x.rank) for x in result.leads] == [(node, gpu, rank)]
    assert "look first at" in result.summary
    kinds = {lk.kind for lk in result.symptom_chain}
    assert kinds & {"collective_progress", "rank_missing", "rank_unreachable"}


def test_bare_seqnum_timeouts_name_the_rank_that_printed_none() -> None:
    """Only `Watchdog caught ... WorkNCCL(SeqNum=9120 ...)` lines: the rank of the default
    group that printed no timeout is the one the others wait for."""
    result = analyze_case(SAMPLES / "hang-watchdog-seqnum-only")
    assert result.status == "unattributed"
    assert [(x.node, x.gpu, x.rank, x.seq) for x in result.leads] == [("node-b", 5, 13, 9120)]
    assert "printed no watchdog timeout" in result.leads[0].why


def _timeouts(seqs: dict[int, int], pg: int | None = 0) -> list[Observation]:
    out = []
    for r, seq in seqs.items():
        attrs = {"rank": r, "global_rank": r, "seq": seq}
        if pg is not None:
            attrs["pg"] = pg
        out.append(Observation(
            kind="collective_timeout", node=f"node-{'ab'[r // 2]}", time=None,
            time_quality="unknown", source="files", attrs=attrs, excerpt=f"rank {r} timeout",
            locator=FileLine(root="c", path=f"logs/r{r}", line=1), parser="t",
        ))
    return out


def test_a_bare_timeout_behind_the_others_is_the_straggler_and_no_group_means_no_lead() -> None:
    ctx = ExecutionContext(
        job_id="1", scheduler="static", state="FAILED", nodes=["node-a", "node-b"],
        start="2026-11-01T00:00:00Z", end="2026-11-01T01:00:00Z",
    )
    hang = hangs.analyze(ctx, _timeouts({0: 50, 1: 50, 2: 49, 3: 50}))
    assert [(x.node, x.rank, x.seq) for x in hang.leads] == [("node-b", 2, 50)]
    # lines that name no process group may belong to different groups: nothing is compared
    assert hangs.analyze(ctx, _timeouts({0: 50, 1: 50, 2: 49, 3: 50}, pg=None)).leads == []


def test_the_straggler_breaks_the_tie_for_the_cause_on_its_node() -> None:
    result = analyze_case(SAMPLES / "hang-straggler-xid79")
    assert (result.status, result.category, result.suspect_nodes) == (
        "attributed", "gpu.lost", ["node-b"]
    )
    assert any("breaks the tie" in n for n in result.notes)
    assert any(lk.kind == "collective_progress" and lk.node == "node-b"
               for lk in result.symptom_chain)
    # without the straggler lines the same evidence is ambiguous
    assert analyze_case(SAMPLES / "ambiguous-xid-and-ib").status == "ambiguous"


def test_a_collective_mismatch_is_an_app_error_on_the_culprit_node() -> None:
    result = analyze_case(SAMPLES / "hang-collective-mismatch")
    assert (result.status, result.category, result.suspect_nodes) == (
        "attributed", "app.error", ["node-b"]
    )


def test_text_output_prints_look_first_at() -> None:
    from attribution_dagster.reports.render import render_result

    text = render_result(analyze_case(SAMPLES / "hang-flight-recorder"))
    assert "look first at: node-d GPU 0 (rank 6, pg 0, seq 58)" in text
    assert "dumps/nccl_trace_rank_6:pg 0 seq 57" in text


def test_dumps_per_node_directories_name_the_node_without_init_lines(tmp_path: Path) -> None:
    """dumps/<node>/nccl_trace_rank_N: the directory says where the rank ran, so the lead is
    found even when the logs hold no NCCL init line (and no launcher prefix)."""
    src = SAMPLES / "hang-flight-recorder"
    case = tmp_path / "case"
    (case / "logs").mkdir(parents=True)
    (case / "context.json").write_text((src / "context.json").read_text())
    for node_dir in (src / "logs").iterdir():
        lines = [x for x in (node_dir / "app.log").read_text().splitlines()
                 if "NCCL INFO" not in x and "[rank" not in x]
        (case / "logs" / node_dir.name).mkdir()
        (case / "logs" / node_dir.name / "app.log").write_text("\n".join(lines) + "\n")
    nodes = ["node-a", "node-b", "node-c", "node-d"]
    for p in (src / "dumps").iterdir():
        rank = int(p.name.rsplit("_", 1)[1])
        dst = case / "dumps" / nodes[rank // 2] / p.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(p.read_bytes())
    result = analyze_case(case)
    assert result.suspect_nodes == ["node-d"]
    assert [(x.node, x.rank) for x in result.leads] == [("node-d", 6)]
    assert result.leads[0].evidence[0] == "dumps/node-d/nccl_trace_rank_6:pg 0 seq 57"


def test_torchrun_local_rank_prefix_gives_the_gpu() -> None:
    obs = [_progress(f"n{r // 2 + 1}", r, 412 if r != 5 else 411, 411) for r in range(8)]
    obs[5] = obs[5].model_copy(update={"excerpt": "[default3]:" + obs[5].excerpt})
    assert [(x.node, x.gpu, x.rank) for x in hangs.analyze(CTX, obs).leads] == [("n3", 3, 5)]


def test_a_clusters_dump_directory_template_finds_the_jobs_dumps(tmp_path: Path) -> None:
    """`dumps: <dir>/{cluster}/{job_id}` in a cluster's configuration: a job whose logs come
    from the cluster's sources reads its dumps from there, shown by their full path, and a job
    with no dump directory (no timeout) gets no coverage error."""
    from attribution_dagster.connectors.clusters import EvidenceSources
    from attribution_dagster.core.config import ClusterConfig
    from attribution_dagster.pipeline import analyze_context

    src = SAMPLES / "hang-flight-recorder"
    ctx = load_context(src)
    template = str(tmp_path / "fr" / "{cluster}" / "{job_id}")
    where = Path(template.format(cluster=ctx.cluster, job_id=ctx.job_id))
    where.mkdir(parents=True)
    for p in (src / "dumps").iterdir():
        (where / p.name).write_bytes(p.read_bytes())
    case = tmp_path / "case"
    (case / "logs").mkdir(parents=True)
    for node_dir in (src / "logs").iterdir():
        (case / "logs" / node_dir.name).mkdir()
        (case / "logs" / node_dir.name / "app.log").write_bytes((node_dir / "app.log").read_bytes())
    sources = EvidenceSources(dumps=ClusterConfig(dumps=template).dumps)
    result = analyze_context(ctx, case=case, sources=sources)
    assert [(x.node, x.rank) for x in result.leads] == [("node-d", 6)]
    assert result.leads[0].evidence[0] == f"{where}/nccl_trace_rank_6:pg 0 seq 57"
    cov = next(c for c in result.coverage if c.source == "files:dumps")
    assert (cov.status, cov.files) == ("ok", 8)
    other = analyze_context(ctx.model_copy(update={"job_id": "no-such-job"}), case=case,
                            sources=sources)
    assert not any(c.source == "files:dumps" for c in other.coverage)


def test_a_dumps_template_with_an_unknown_field_is_a_clear_config_error() -> None:
    from pydantic import ValidationError

    from attribution_dagster.core.config import ClusterConfig

    with pytest.raises(ValidationError, match=r"only \{cluster\} and \{job_id\}"):
        ClusterConfig(dumps="/x/{user}/{job_id}")

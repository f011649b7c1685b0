"""Issue 9, item 3: an untimed line is an interval (previous timed line .. next timed line).

Scanner: `FileScan.latest` holds the next timed line's time for every untimed hit, across
block boundaries, from one forward search shared by the hits before that timed line.
Engine: a cause precedes a symptom only if it can have happened first; the chain never shows a
symptom before the cause it follows from (the README's XID 149 sample), and an unknown-time but
decisive line (srun `Node failure on X` in a file without timed lines) still counts.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.formats.scan import FileScanner, ScanSpec
from attribution_dagster.core.observation import Observation
from attribution_dagster.pipeline import analyze_case, catalog
from attribution_dagster.rules.engine import load_engine

UTC = timezone.utc
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]
ENGINE = load_engine()


def _spec(block: int, use_hs: bool) -> ScanSpec:
    anchors = catalog().anchors()
    return ScanSpec(
        literals=tuple(a.literal for a in anchors),
        context_after=tuple(a.context_after for a in anchors),
        window_start=T0 - timedelta(hours=1),
        window_end=T0 + timedelta(hours=2),
        reference=T0,
        block_size=block,
        use_hyperscan=use_hs,
    )


@pytest.mark.parametrize("use_hs", [True, False])
@pytest.mark.parametrize("block", [16, 41, 100, 1 << 20])
def test_untimed_hits_get_the_next_timed_line_as_upper_bound(block: int, use_hs: bool) -> None:
    lines = [b"2026-11-02T10:00:01Z launch"]
    lines += [b"srun: error: node-a: task 0: Exited with exit code 1"]
    lines += [b"filler %d" % i for i in range(12)]
    lines += [b"srun: error: node-b: task 1: Exited with exit code 1"]
    lines += [b"2026-11-02T10:12:40Z next timed line"]
    lines += [b"2026-11-02T10:13:00Z NCCL WARN timed hit"]
    lines += [b"NCCL WARN after the last timed line"]
    res = FileScanner(_spec(block, use_hs)).scan_bytes(b"\n".join(lines) + b"\n")
    by_line = {n: (t, q) for n, t, q, _ in res.records}
    t1, t2 = T0 + timedelta(seconds=1), T0 + timedelta(minutes=12, seconds=40)
    assert by_line[2] == (t1, "inherited") and by_line[15] == (t1, "inherited")
    assert res.latest[2] == t2 and res.latest[15] == t2
    assert 17 not in res.latest  # exact
    assert 18 not in res.latest  # nothing timed after it: bounded by the job end


def test_records_and_observations_carry_the_latest_bound(tmp_path: Path) -> None:
    case = tmp_path / "c"
    (case / "logs" / "node-a").mkdir(parents=True)
    (case / "logs" / "node-a" / "app.log").write_text(
        "2026-11-02T10:00:01Z start\n"
        "ValueError: loss is NaN\n"
        "2026-11-02T10:05:00Z torchrun: exiting\n"
    )
    (case / "context.json").write_text(
        '{"job_id": "1", "scheduler": "static", "state": "FAILED", "exit_code": 1,'
        ' "start": "2026-11-02T10:00:00Z", "end": "2026-11-02T10:06:00Z", "nodes": ["node-a"]}'
    )
    res = analyze_case(case)
    link = next(lk for lk in res.symptom_chain if lk.kind == "traceback")
    assert link.time == T0 + timedelta(seconds=1)
    assert link.time_latest == T0 + timedelta(minutes=5)
    assert link.evidence.time_latest == T0 + timedelta(minutes=5)


def test_readme_xid149_sample_chain_has_no_symptom_before_the_fault() -> None:
    res = analyze_case(ROOT / "samples" / "xid149-nvlink-3node")
    assert res.category == "gpu.nvlink"
    cause = next(lk for lk in res.symptom_chain if lk.role == "root_cause")
    assert res.symptom_chain[0] is cause or res.symptom_chain[0].time == cause.time
    exits = [lk for lk in res.symptom_chain if lk.evidence.locator.endswith(("out:3", "out:4"))]
    assert exits, "srun exits missing from the chain"
    for lk in exits:
        assert lk.time is not None and cause.time is not None and lk.time >= cause.time
        assert lk.time_latest is not None and lk.time_latest > cause.time
    times = [lk.time for lk in res.symptom_chain if lk.time is not None]
    assert times == sorted(times)


def _ctx(**kw: object) -> ExecutionContext:
    base: dict[str, object] = dict(
        job_id="9",
        scheduler="slurm",
        state="FAILED",
        exit_code=1,
        start=T0,
        end=T0 + timedelta(hours=1),
        nodes=["node-a", "node-b", "node-c"],
    )
    base.update(kw)
    return ExecutionContext(**base)  # type: ignore[arg-type]


def _ob(
    kind: str, node: str, t: datetime | None, quality: str = "exact", **kw: object
) -> Observation:
    return Observation(
        kind=kind,
        node=node,
        time=t,
        time_quality=quality,  # type: ignore[arg-type]
        excerpt=f"{kind} on {node}",
        source="files",
        locator=f"logs/{node}/x.log:{abs(hash((kind, node, t))) % 997 + 1}",
        parser="test",
        **kw,  # type: ignore[arg-type]
    )


def test_cause_after_a_symptom_upper_bound_is_late() -> None:
    """A symptom written before 10:05 (its next timed line) cannot follow an XID at 10:20."""
    sym = _ob(
        "process_exit",
        "node-a",
        T0 + timedelta(minutes=1),
        "inherited",
        time_latest=T0 + timedelta(minutes=5),
        attrs={"exit_code": 1},
    )
    app = _ob(
        "traceback",
        "node-a",
        T0 + timedelta(minutes=1),
        "inherited",
        time_latest=T0 + timedelta(minutes=5),
        attrs={"family": "app", "exc_type": "KeyError", "message": "'text'"},
    )
    xid = _ob("xid", "node-b", T0 + timedelta(minutes=20), code=79)
    res = ENGINE.attribute(_ctx(), [sym, app, xid], [SourceCoverage(source="files:logs")])
    assert (res.status, res.category) == ("attributed", "app.error")


def test_unknown_time_node_failure_counts_within_the_job_window() -> None:
    down = _ob(
        "node_unreachable",
        "node-a",
        None,
        "unknown",
        attrs={"failed_host": "node-c", "logged_on": "node-a"},
    )
    outs = [_ob("collective_timeout", n, T0 + timedelta(minutes=22)) for n in ("node-a", "node-b")]
    res = ENGINE.attribute(_ctx(state="NODE_FAIL", exit_code=None), [down, *outs], [])
    assert (res.status, res.category, res.suspect_nodes) == ("attributed", "node.down", ["node-c"])
    root = next(lk for lk in res.symptom_chain if lk.role == "root_cause")
    assert root.time == T0 and root.time_latest == T0 + timedelta(hours=1)


@pytest.mark.parametrize("use_hs", [True, False])
@pytest.mark.parametrize("block", [16, 41, 100, 1 << 20])
def test_scanner_reports_each_files_last_timed_line(block: int, use_hs: bool) -> None:
    """Silence (issue 9 item 2) needs where a file stops; the scanner finds it with the
    backward searches it already makes, whatever the block size."""
    lines = [b"2026-11-02T10:00:01Z start", b"NCCL WARN hit"]
    lines += [b"2026-11-02T10:0%d:00Z step %d" % (i, i) for i in range(1, 6)]
    lines += [b"untimed tail %d" % i for i in range(7)]
    res = FileScanner(_spec(block, use_hs)).scan_bytes(b"\n".join(lines) + b"\n")
    assert res.tail is not None
    lineno, t, text = res.tail
    assert (lineno, t, text) == (7, T0 + timedelta(minutes=5), "2026-11-02T10:05:00Z step 5")
    none = FileScanner(_spec(block, use_hs)).scan_bytes(b"no time\nNCCL WARN x\n")
    assert none.tail is None


@pytest.mark.parametrize("use_hs", [True, False])
def test_untimed_line_whose_interval_reaches_into_the_window_is_kept(use_hs: bool) -> None:
    """A timed banner hours before the job, then untimed output during it: the untimed lines
    lie between the banner and the next timed line (inside the window), so they are kept."""
    lines = [
        b"2026-11-02T07:00:00Z container started",
        b"NCCL WARN before the next timed line",
        b"2026-11-02T10:20:00Z training",
        b"2026-11-02T07:10:00Z a stale line",
        b"NCCL WARN provably before the window",
        b"2026-11-02T08:00:00Z still before",
    ]
    spec = _spec(1 << 20, use_hs)
    spec = ScanSpec(**{**spec.__dict__, "window_start": T0 - timedelta(minutes=2)})
    res = FileScanner(spec).scan_bytes(b"\n".join(lines) + b"\n")
    kept = {n for n, _, _, _ in res.records}
    assert 2 in kept and 5 not in kept
    assert res.latest[2] == T0 + timedelta(minutes=20)

"""Lines that state the same facts are folded where they are scanned (issue 16).

`rules/grouping.py` says which kept lines of a file state the same facts; the files reader
folds them in its scanner workers (`connectors/files/grouping.py`). The normalizer must give
the same observations either way: same facts, counts, first and last times and locators.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster import pipeline
from attribution_dagster.connectors.files import grouping
from attribution_dagster.core.formats.scan import FileScan
from attribution_dagster.core.settings import AnalysisSettings

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted(
    p.parent
    for base in (ROOT / "samples", ROOT / "tests" / "heldout")
    for p in base.rglob("context.json")
    if (p.parent / "logs").is_dir()
)
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)


def _observations(case: Path, group: bool, monkeypatch) -> tuple[list[dict], int, dict]:
    """Observations (as JSON), records kept and the verdict of one case, grouped or not."""
    with monkeypatch.context() as m:
        if group:  # every file grouped, however few lines it keeps
            m.setattr(grouping, "GROUP_MIN_LINES", 0)
        else:
            m.setattr(pipeline, "_grouping", lambda source, ctx: {})
        ctx = pipeline.load_context(case)
        settings = AnalysisSettings()
        raw = pipeline.collect_evidence(case, ctx, settings)
        obs = pipeline.normalize(raw, ctx)
        result = pipeline.attribute(ctx, obs, raw.coverage, settings, topology=raw.topology)
    verdict = result.model_dump(mode="json", exclude={"analyzed_at", "coverage"})
    return [o.model_dump(mode="json") for o in obs], len(raw.records), verdict


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
def test_grouping_every_file_changes_no_observation_and_no_verdict(case, monkeypatch):
    plain, _, verdict_plain = _observations(case, False, monkeypatch)
    grouped, _, verdict_grouped = _observations(case, True, monkeypatch)
    assert grouped == plain
    assert verdict_grouped == verdict_plain


def test_the_cases_hold_lines_that_do_fold(monkeypatch):
    """The comparison above is not vacuous: grouping folds lines in some of the cases."""
    folded = 0
    for case in CASES:
        _, n_plain, _ = _observations(case, False, monkeypatch)
        _, n_grouped, _ = _observations(case, True, monkeypatch)
        folded += n_plain > n_grouped
    assert folded >= 5


def _scan(lines: list[tuple[int, datetime | None, str, str]], repeats=None) -> FileScan:
    return FileScan(records=list(lines), repeats=dict(repeats or {}))


def test_a_fact_keeps_its_count_first_and_last_line():
    t = [T0 + timedelta(seconds=s) for s in range(5)]
    res = _scan(
        [
            (10, t[1], "exact", "a1"),
            (11, t[0], "exact", "other"),
            (12, t[2], "exact", "a2"),
            (13, t[4], "exact", "a3"),
            (14, t[3], "exact", "a4"),
        ]
    )
    parts = [[(None, "A")], [(None, "B")], [(None, "A")], [(None, "A")], [(None, "A")]]
    rows = grouping.grouped_rows(res, parts, keep=1)
    by_text = {r[3]: r for r in rows}
    assert set(by_text) == {"a1", "other"}
    line, when, _, _, only, count, last_line, last_t, last_text = by_text["a1"]
    assert (line, when, only, count) == (10, t[1], None, 4)
    # the latest line is the one with the latest time (13), not the last in the file (14)
    assert (last_line, last_t, last_text) == (13, t[4], "a3")
    assert by_text["other"][5] == 1 and by_text["other"][6] is None


def test_an_earlier_time_later_in_the_file_becomes_the_first_line():
    t1, t0 = T0 + timedelta(seconds=9), T0
    res = _scan([(5, t1, "exact", "late"), (6, t0, "exact", "early")])
    [row] = grouping.grouped_rows(res, [[(None, "A")], [(None, "A")]], keep=1)
    assert row[:4] == (6, t0, "exact", "early")
    assert row[5:] == (2, 5, t1, "late")


def test_a_line_with_two_facts_is_split_and_each_part_counts_alone():
    """Line 2 repeats the first part of line 1 and brings a new second part."""
    res = _scan([(1, T0, "exact", "x"), (2, T0, "exact", "y")])
    parts = [[(("p",), "P1"), (("q",), "Q1")], [(("p",), "P1"), (("q",), "Q2")]]
    rows = grouping.grouped_rows(res, parts, keep=1)
    assert [(r[0], r[4], r[5]) for r in rows] == [(1, ("p",), 2), (1, ("q",), 1), (2, ("q",), 1)]


def test_a_storm_folded_by_the_scanner_adds_its_count_and_last_line():
    t = [T0 + timedelta(seconds=s) for s in range(4)]
    res = _scan(
        [(1, t[0], "exact", "s1"), (2, t[1], "exact", "s2")],
        repeats={2: [100, 900, t[3], "s900"]},
    )
    [row] = grouping.grouped_rows(res, [[(None, "A")], [(None, "A")]], keep=1)
    assert row == (1, t[0], "exact", "s1", None, 101, 900, t[3], "s900")


def test_keep_holds_the_first_lines_as_themselves():
    res = _scan([(i, T0 + timedelta(seconds=i), "exact", f"l{i}") for i in range(1, 6)])
    rows = grouping.grouped_rows(res, [[(None, "A")]] * 5, keep=2)
    assert [(r[0], r[5], r[6]) for r in rows] == [(1, 1, None), (2, 4, 5)]


def test_lines_kept_whole_are_not_folded():
    res = _scan([(1, T0, "exact", "a"), (2, T0, "exact", "a")])
    rows = grouping.grouped_rows(res, [None, None], keep=1)
    assert [r[0] for r in rows] == [1, 2]


def _nccl_case(root: Path, comms: int) -> Path:
    """Two nodes whose app.log holds `comms` communicators x 8 ranks of NCCL_DEBUG=INFO init
    (both line forms, as bench/generate.py writes them) and a watchdog timeout on each."""
    nodes = ["node-a", "node-b"]
    for n, host in enumerate(nodes):
        d = root / "logs" / host
        d.mkdir(parents=True)
        out = ["2026-11-02 10:00:00,000 INFO train.py:80 initializing process groups"]
        for c in range(comms):
            nranks = (8, 16)[c % 2]
            for lr in range(8):
                rank = lr if nranks == 8 else n * 8 + lr
                pfx = f"{host}:{4000 + lr}:{4100 + lr} [{lr}] NCCL INFO"
                out.append(
                    f"{pfx} comm 0x{0x5581C2A000 + c * 8 + lr:x} rank {rank} nRanks {nranks} "
                    f"nNodes {nranks // 8} localRanks 8 localRank {lr} MNNVL 0"
                )
                out.append(
                    f"{pfx} ncclCommInitRank comm 0x{0x7781C2A000 + c * 8 + lr:x} rank {rank} "
                    f"nranks {nranks} cudaDev {lr} nvmlDev {lr} busId {lr}b000 "
                    f"commId 0x{c + 0x1000:016x} - Init COMPLETE"
                )
        out.append(
            f"2026-11-02 10:20:00,000 [rank{n * 8}]:[E ProcessGroupNCCL.cpp:616] [Rank {n * 8}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 "
            "milliseconds before timing out."
        )
        (d / "app.log").write_text("\n".join(out) + "\n")
    ctx = {
        "job_id": "nccl-grouping",
        "scheduler": "slurm",
        "nodes": nodes,
        "start": "2026-11-02T10:00:00Z",
        "end": "2026-11-02T10:25:00Z",
        "state": "FAILED",
        "exit_code": 1,
    }
    (root / "context.json").write_text(json.dumps(ctx))
    return root


def test_nccl_init_lines_fold_to_their_facts_in_a_big_file(tmp_path, monkeypatch):
    """Over GROUP_MIN_LINES kept lines in a file (the default threshold, scanned in worker
    processes): a few records per fact, the same observations and verdict as without."""
    case = _nccl_case(tmp_path / "nccl", comms=160)  # 2,560 init lines per file
    assert 2 * 8 * 160 > grouping.GROUP_MIN_LINES
    with monkeypatch.context() as m:
        m.setattr("attribution_dagster.connectors.files.reader.PARALLEL_MIN_BYTES", 0)
        plain, n_plain, verdict_plain = _observations(case, False, monkeypatch)
        with monkeypatch.context() as m2:  # the default threshold, not 0
            m2.setattr(grouping, "GROUP_MIN_LINES", grouping.GROUP_MIN_LINES)
            ctx = pipeline.load_context(case)
            raw = pipeline.collect_evidence(case, ctx, AnalysisSettings())
    assert n_plain == 2 * 2 * 8 * 160 + 2
    # per node: 2 rank facts (nRanks 8 and 16) x 8 ranks, 160 communicators (one per commId
    # and node); every other line folded into those
    assert len(raw.records) <= 2 * (16 + 160) + 2
    assert max(r.count for r in raw.records) >= 80  # one (rank, nranks) per form: 80 comms
    obs = pipeline.normalize(raw, ctx)
    assert [o.model_dump(mode="json") for o in obs] == plain
    result = pipeline.attribute(ctx, obs, raw.coverage, AnalysisSettings(), topology=raw.topology)
    assert result.model_dump(mode="json", exclude={"analyzed_at", "coverage"}) == verdict_plain


def test_normalize_consuming_the_records_gives_the_same_observations(tmp_path):
    """`consume=True` (the direct and Dagster paths: only coverage and topology are used
    afterwards) empties raw.records as they are parsed; the observations are the same."""
    case = _nccl_case(tmp_path / "nccl", comms=40)
    ctx = pipeline.load_context(case)
    raw = pipeline.collect_evidence(case, ctx, AnalysisSettings())
    kept = len(raw.records)
    plain = pipeline.normalize(raw, ctx)
    assert len(raw.records) == kept  # not consumed by default
    consumed = pipeline.normalize(raw, ctx, consume=True)
    assert raw.records == [] and kept > 0
    assert [o.model_dump(mode="json") for o in consumed] == [
        o.model_dump(mode="json") for o in plain
    ]

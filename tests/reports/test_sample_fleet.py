"""The weekly report over the sample fleet, as `make run` records it: every case under
samples/ analysed (pipeline.analyze_case) and written through the SQL sink with its
context, so each job counts in the ISO week it ended (the samples span 2026-W37 to W53).

The report is checked against an oracle computed from the results themselves: each week's
failed jobs and their verdicts, and the fabric offenders: every switch, switch port and
NVLink domain the topology samples (issue 23) name in two or more jobs, named with their
cluster across the fleet, and a switch port failing alone (level `link`) in two or more
jobs, across weeks too, marked a cable or transceiver suspect (topo-link-ib in 2026-W43 and
topo-link-ib-again in W44: the same cable). tests/reports/test_fabric_offenders.py checks
the same over a two-week fleet written with `fault_domain` set.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date, timedelta
from pathlib import Path

import pytest

from attribution_dagster.core.result import AttributionResult
from attribution_dagster.pipeline import analyze_case, load_context
from attribution_dagster.reports import weekly as report
from attribution_dagster.sinks.sql import SqlSink, switch_port_name

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


@pytest.fixture(scope="module")
def sample_fleet(tmp_path_factory) -> tuple[str, dict[str, tuple[AttributionResult, date]]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('samples')}/results.db"
    sink = SqlSink(url)
    jobs: dict[str, tuple[AttributionResult, date]] = {}
    for case in sorted(p.parent for p in SAMPLES.glob("*/expected.json")):
        ctx = load_context(case)
        result = analyze_case(case)
        sink.write([result], contexts=[ctx])
        ref = f"{ctx.cluster}/{ctx.job_id}" if ctx.cluster else ctx.job_id
        jobs[ref] = (result, _monday(ctx.end.date()))
    assert len(jobs) >= 30
    return url, jobs


def _fabric_oracle(jobs, monday: date, weeks: int) -> dict[tuple[str, str], tuple[set, int]]:
    """(kind, name) -> (jobs, jobs at level link) over the look-back window."""
    since = monday - timedelta(days=7 * (weeks - 1))
    seen: defaultdict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for ref, (r, week) in jobs.items():
        fd = r.fault_domain
        if fd is None or r.status != "attributed" or not since <= week <= monday:
            continue
        if not (r.category or "").startswith(report.INFRA_PREFIXES):
            continue
        kind = "nvlink_domain" if fd.level == "nvlink_domain" else "switch"
        where = f"{r.cluster}/" if r.cluster else ""
        seen[(kind, where + fd.name)][ref] = fd.level
        for p in fd.ports:
            if p.switch and p.switch_port:
                port = where + switch_port_name(p.switch, p.switch_port)
                seen[("switch_port", port)][ref] = fd.level
    return {k: (set(v), sum(lv == "link" for lv in v.values()))
            for k, v in seen.items() if len(v) >= 2}


def test_every_sample_week_reports_its_failed_jobs_and_fabric(sample_fleet):
    url, jobs = sample_fleet
    weeks = sorted({w for _, w in jobs.values()})
    assert len(weeks) >= 4
    for monday in weeks:
        rep = report.build_report(url, monday)
        mine = {ref: r for ref, (r, w) in jobs.items() if w == monday}
        assert rep.this.jobs == len(mine), monday
        failed = {ref: r for ref, r in mine.items() if r.failed}
        got = {f.job: f for f in rep.failed_jobs}
        assert set(got) == set(failed), monday
        for ref, r in failed.items():
            verdict = r.category if r.status == "attributed" else r.status
            assert (got[ref].category or got[ref].status) == verdict, ref
            assert got[ref].suspects == r.suspect_nodes, ref
        want = _fabric_oracle(jobs, monday, rep.lookback_weeks)
        found = {(f.kind, f.name): f for f in rep.fabric_offenders}
        assert set(found) == set(want), monday
        for key, (refs, link_jobs) in want.items():
            assert set(found[key].jobs) == refs
            assert found[key].cable_suspect == (key[0] == "switch_port" and link_jobs >= 2)
    # the sample fleet's repeat cable: one suspect, seen in two weeks
    rep = report.build_report(url, date(2026, 10, 26))
    [cable] = [f for f in rep.fabric_offenders if f.cable_suspect]
    assert cable.name == "ib-ndr-dfw1/ib-leaf-07 port 5" and len(cable.weeks) == 2


def test_sample_network_faults_are_listed_with_their_verdicts(sample_fleet):
    """Each network sample is a row of its week's failed-jobs table, with its category."""
    url, jobs = sample_fleet
    network = [(ref, r, w) for ref, (r, w) in jobs.items()
               if r.status == "attributed" and (r.category or "").startswith("network.")]
    assert network, "the samples hold network faults"
    for ref, r, monday in network:
        rep = report.build_report(url, monday, meanings={})
        md = report.render_markdown(rep, {})
        assert ref in md  # in the failed-jobs table, with its verdict
        row = next(line for line in md.splitlines() if line.startswith(f"| {ref} |"))
        assert r.category in row

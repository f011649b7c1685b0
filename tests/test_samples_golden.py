"""Golden tests: every case under samples/ analysed end to end against its expected.json.

A case is any directory holding both context.json and expected.json. expected.json says:
failed, status, category, suspect_nodes (a set), candidate_categories (must all appear among
the result's candidates), and optionally root_cause_kinds (kinds that must appear with role
root_cause in the symptom chain). Beyond the outcome, every result must validate against the
contract, every `path:line` locator must reopen the raw line it quotes, the symptom chain
must be time-ordered, and no root cause may come from outside the job's nodes or window.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.formats.flight_recorder import read_dump
from attribution_dagster.core.result import CONTRACT_FIELDS, AttributionResult
from attribution_dagster.core.settings import AnalysisSettings
from attribution_dagster.rules.vocabulary import vocabulary

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CASES = sorted(
    p.parent.name for p in SAMPLES.glob("*/expected.json") if (p.parent / "context.json").is_file()
)
STATUSES = {"attributed", "ambiguous", "unattributed", "not_failed"}
LOCATOR = re.compile(r"^(?P<path>.+):(?P<line>\d+)$")
DUMP_LOCATOR = re.compile(r"^(?P<path>dumps/\S+):pg (?P<pg>\S+)(?: seq (?P<seq>\d+))?$")
CONTEXT_LOCATOR = re.compile(r"^(?:.*/)?context\.json:(?P<field>[A-Za-z_]+)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _expected(name: str) -> dict:
    return json.loads((SAMPLES / name / "expected.json").read_text())


def _context(name: str) -> ExecutionContext:
    return ExecutionContext.model_validate_json((SAMPLES / name / "context.json").read_text())


@functools.cache
def _result(name: str) -> AttributionResult:
    from attribution_dagster.pipeline import analyze_case

    return analyze_case(SAMPLES / name)


def _norm(s: str) -> str:
    return " ".join(ANSI.sub("", s).replace("\x00", "").split())


def _open_lines(path: Path) -> list[str]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode("utf-8", errors="replace").split("\n")


def _resolve(case: Path, p: str) -> Path | None:
    for cand in (case / p, Path(p), SAMPLES.parent / p):
        if cand.is_file():
            return cand
    return None


def _all_evidence(res: AttributionResult):
    yield from res.evidence
    for link in res.symptom_chain:
        yield link.evidence


# ---- the samples themselves -------------------------------------------------------
def test_enough_cases(samples_root: Path) -> None:
    assert samples_root == SAMPLES
    assert len(CASES) >= 16, CASES
    assert "xid149-nvlink-3node" in CASES


def test_every_status_is_exercised() -> None:
    assert {_expected(n)["status"] for n in CASES} == STATUSES


@pytest.mark.parametrize("name", CASES)
def test_expected_file_is_coherent(name: str) -> None:
    """expected.json uses only taxonomy ids and kinds, and agrees with the context."""
    exp, ctx = _expected(name), _context(name)
    assert exp["status"] in STATUSES
    assert exp["failed"] == ctx.failed
    assert (exp["status"] == "not_failed") == (not exp["failed"])
    if exp["status"] == "attributed":
        assert exp["category"] in vocabulary().categories
    else:
        assert exp["category"] is None
    assert set(exp["suspect_nodes"]) <= set(ctx.nodes)
    assert set(exp.get("candidate_categories", [])) <= set(vocabulary().categories)
    if exp.get("candidate_categories"):
        assert exp["status"] == "ambiguous"
    assert set(exp.get("root_cause_kinds", [])) <= set(vocabulary().kinds)
    assert exp.get("why"), "every case says why"
    assert any((SAMPLES / name / "logs").iterdir()), "a case without logs tests nothing"


# ---- the outcome ------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in CASES if "fault_domain" in _expected(n)])
def test_fault_domain_matches_expected(name: str) -> None:
    """Where expected.json says `fault_domain` (issue 23): null, or the same level and name,
    the same nodes and the same cables (each `{node, host_port, switch, switch_port}`)."""
    want, got = _expected(name)["fault_domain"], _result(name).fault_domain
    if want is None:
        assert got is None, f"no fault domain expected, got {got}"
        return
    assert got is not None, f"want {want['level']} {want['name']}, got none"
    assert (got.level, got.name) == (want["level"], want["name"])
    assert set(got.nodes) == set(want["nodes"])
    ports = {(p.node, p.host_port, p.switch, p.switch_port) for p in got.ports}
    keys = ("node", "host_port", "switch", "switch_port")
    assert ports == {tuple(p[k] for k in keys) for p in want["ports"]}


def test_every_fault_domain_level_has_a_sample() -> None:
    levels = {
        (_expected(n)["fault_domain"] or {}).get("level")
        for n in CASES
        if "fault_domain" in _expected(n)
    }
    assert levels == {"link", "leaf", "spine", "nvlink_domain", None}


@pytest.mark.parametrize("name", CASES)
def test_outcome_matches_expected(name: str) -> None:
    exp, res = _expected(name), _result(name)
    problems = []
    if res.failed != exp["failed"]:
        problems.append(f"failed: got {res.failed}, want {exp['failed']}")
    if res.status != exp["status"]:
        problems.append(f"status: got {res.status!r}, want {exp['status']!r}")
    if res.category != exp["category"]:
        problems.append(f"category: got {res.category!r}, want {exp['category']!r}")
    if set(res.suspect_nodes) != set(exp["suspect_nodes"]):
        got, want = sorted(res.suspect_nodes), exp["suspect_nodes"]
        problems.append(f"suspect_nodes: got {got}, want {want}")
    got_cands = {c.category for c in res.candidates}
    missing = set(exp.get("candidate_categories", [])) - got_cands
    if missing:
        problems.append(f"candidates: missing {sorted(missing)}, got {sorted(got_cands)}")
    roots = {link.kind for link in res.symptom_chain if link.role == "root_cause"}
    missing_kinds = set(exp.get("root_cause_kinds", [])) - roots
    if missing_kinds:
        problems.append(f"root_cause kinds: missing {sorted(missing_kinds)}, got {sorted(roots)}")
    detail = f"\n  summary: {res.summary}\n  rule: {res.rule}\n  notes: {res.notes}"
    assert not problems, f"{name}: " + "; ".join(problems) + detail


# ---- the contract -----------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_result_honours_the_contract(name: str) -> None:
    res, ctx = _result(name), _context(name)
    doc = json.loads(res.contract_json())
    assert CONTRACT_FIELDS <= set(doc), CONTRACT_FIELDS - set(doc)
    again = AttributionResult.model_validate(doc)
    assert again.status == res.status and again.category == res.category
    assert doc["job_id"] == ctx.job_id
    assert doc["status"] in STATUSES
    assert doc["rules_version"]
    if doc["status"] == "attributed":
        assert doc["category"] in vocabulary().categories
    else:
        assert doc["category"] is None
    if doc["status"] == "ambiguous":
        assert len(doc["candidates"]) >= 2, "ambiguous means at least two candidates fit"
    for cand in doc["candidates"]:
        assert cand["category"] in vocabulary().categories
    assert set(doc["suspect_nodes"]) <= set(ctx.nodes), "suspects must be nodes of the job"
    for link in doc["symptom_chain"]:
        assert link["role"] in ("root_cause", "symptom")
        assert link["kind"] in vocabulary().kinds


@pytest.mark.parametrize("name", CASES)
def test_evidence_locators_reopen_the_raw_line(name: str) -> None:
    res, case = _result(name), SAMPLES / name
    items = list(_all_evidence(res))
    if res.status in ("attributed", "ambiguous"):
        assert items, "an attribution must rest on evidence"
    cache: dict[Path, list[str]] = {}
    context = json.loads((case / "context.json").read_text())
    for ev in items:
        cm = CONTEXT_LOCATOR.match(ev.locator)
        if cm:  # the scheduler's own record, e.g. context.json:state
            assert cm["field"] in context, f"{ev.locator}: no such context field"
            assert str(context[cm["field"]]) in ev.excerpt, f"{ev.locator}: excerpt {ev.excerpt!r}"
            continue
        dm = DUMP_LOCATOR.match(ev.locator)
        if dm:  # a flight-recorder dump entry: reopened with the restricted reader
            path = _resolve(case, dm["path"])
            assert path is not None, f"locator names no dump of the case: {ev.locator!r}"
            dump = read_dump(path, dm["path"])
            seqs = {e.collective_seq_id for e in dump.entries if e.pg_id == dm["pg"]}
            assert dm["pg"] in dump.pg_status or seqs, f"{ev.locator}: no such process group"
            if dm["seq"] is not None:
                assert int(dm["seq"]) in seqs, f"{ev.locator}: no entry at that sequence number"
            assert f"pg {dm['pg']}" in ev.excerpt, f"{ev.locator}: excerpt {ev.excerpt!r}"
            continue
        m = LOCATOR.match(ev.locator)
        assert m, f"samples are files only, so every locator is path:line: {ev.locator!r}"
        path = _resolve(case, m["path"])
        assert path is not None, f"locator names no file of the case: {ev.locator!r}"
        lines = cache.setdefault(path, _open_lines(path))
        n = int(m["line"])
        assert 1 <= n <= len(lines), f"{ev.locator}: file has {len(lines)} lines"
        line = lines[n - 1]
        if path.suffix == ".prom":
            assert line.strip() and not line.startswith("#"), f"{ev.locator} is not a sample line"
            continue
        head = _norm(ev.excerpt.split("\n", 1)[0])[:40]
        assert head, f"{ev.locator}: empty excerpt"
        assert head in _norm(line), f"{ev.locator}: {head!r} not in {line[:200]!r}"


@pytest.mark.parametrize("name", CASES)
def test_symptom_chain_is_time_ordered(name: str) -> None:
    chain = _result(name).symptom_chain
    seen_unknown = False
    last = None
    for link in chain:
        if link.time is None:
            seen_unknown = True
            continue
        assert not seen_unknown, "links with unknown time go last"
        if last is not None:
            assert link.time >= last, f"{link.kind}@{link.node} at {link.time} comes after {last}"
        last = link.time


@pytest.mark.parametrize("name", CASES)
def test_root_causes_come_from_the_job(name: str) -> None:
    """Nothing from a node outside context.nodes or from outside the read window is a root cause."""
    res, ctx = _result(name), _context(name)
    window = AnalysisSettings().window(ctx)
    slack = timedelta(seconds=AnalysisSettings().skew_seconds)
    for link in res.symptom_chain:
        if link.role != "root_cause" or CONTEXT_LOCATOR.match(link.evidence.locator):
            continue  # the job's final state comes from the context, not from a node
        assert link.node in ctx.nodes, f"root cause on {link.node}, not a node of the job"
        if link.time is not None:
            assert window.start - slack <= link.time <= window.end + slack, (
                f"root cause at {link.time} outside the job window {window.start}..{window.end}"
            )


@pytest.mark.parametrize("name", CASES)
def test_nothing_is_taken_from_nodes_outside_the_job(name: str) -> None:
    """A log directory of a node not in context.nodes (swept up by a collector) is ignored."""
    res, ctx = _result(name), _context(name)
    for ev in _all_evidence(res):
        if CONTEXT_LOCATOR.match(ev.locator):
            continue
        assert ev.node in ctx.nodes, f"evidence from {ev.node}, not a node of the job: {ev.locator}"


@pytest.mark.parametrize("name", CASES)
def test_coverage_names_nodes_without_logs(name: str) -> None:
    res, ctx = _result(name), _context(name)
    logs = SAMPLES / name / "logs"
    absent = {n for n in ctx.nodes if not (logs / n).is_dir()}
    reported = {n for cov in res.coverage for n in cov.nodes_missing}
    assert absent <= reported, (
        f"nodes without logs not reported as missing: {sorted(absent - reported)}"
    )


def _bad_lines(case: Path, max_line_bytes: int) -> int:
    bad = 0
    for path in (case / "logs").rglob("*"):
        if not path.is_file():
            continue
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for line in raw.split(b"\n"):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                bad += 1
                continue
            if len(line) > max_line_bytes or b"\x00" in line:
                bad += 1
    return bad


@pytest.mark.parametrize("name", CASES)
def test_damaged_lines_are_counted_not_fatal(name: str) -> None:
    """Invalid UTF-8, NUL runs and overlong lines are counted in coverage; the case still runs."""
    bad = _bad_lines(SAMPLES / name, AnalysisSettings().max_line_bytes)
    counted = sum(cov.problems for cov in _result(name).coverage)
    if bad:
        assert counted > 0, f"{bad} damaged lines in the case, none counted in coverage"


# ---- the command line -------------------------------------------------------------
def _cli() -> list[str]:
    # `python -m` runs the same entry point as the `attribution` console script, without
    # depending on how the package was installed into the environment
    return [sys.executable, "-m", "attribution_dagster.cli"]


def test_cli_prints_one_contract_object() -> None:
    case = SAMPLES / "xid149-nvlink-3node"
    proc = subprocess.run(
        [*_cli(), "analyze", str(case), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=SAMPLES.parent,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.strip()
    assert out.startswith("{") and out.endswith("}"), out[:500]
    doc = json.loads(out)  # raises if stdout holds anything but one JSON document
    assert isinstance(doc, dict)
    assert CONTRACT_FIELDS <= set(doc), CONTRACT_FIELDS - set(doc)
    AttributionResult.model_validate(doc)
    exp = _expected("xid149-nvlink-3node")
    assert doc["job_id"] == "4812"
    assert (doc["status"], doc["category"]) == (exp["status"], exp["category"])
    assert set(doc["suspect_nodes"]) == set(exp["suspect_nodes"])

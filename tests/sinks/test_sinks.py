"""The SQL sink and the asset value store, on SQLite and on a real PostgreSQL server.

PostgreSQL tests run when ATTRIBUTION_TEST_PG_URL is set (`.ci/run` starts a throwaway
server with scripts/ci-services.sh); they are skipped only when it is unset.
"""

from __future__ import annotations

import io
import json
import os
import threading
import uuid
from datetime import datetime, timezone

import pytest
from sqlalchemy import inspect, text

from attribution_dagster.core.database import default_sqlite_url, shared_engine
from attribution_dagster.core.evidence import SourceCoverage
from attribution_dagster.core.result import CONTRACT_FIELDS, AttributionResult, ChainLink, Evidence
from attribution_dagster.resources.value_store import AssetValueStore
from attribution_dagster.sinks import SqlSink, StdoutSink
from attribution_dagster.sinks.sql import metadata as sink_metadata

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")

HOSTILE = (
    'x\'); DROP TABLE attribution_results; -- \x00 "quoted" ; DELETE FROM attribution_evidence'
)


def make_result(
    job_id: str,
    *,
    cluster: str | None = "c1",
    rules: str = "r1",
    excerpt: str = "NVRM: Xid 79",
    status: str = "attributed",
) -> AttributionResult:
    t = datetime(2026, 11, 2, 10, 3, 11, tzinfo=timezone.utc)
    ev = Evidence(
        source="files", locator="logs/node-b/kern.log:7", time=t, node="node-b", excerpt=excerpt
    )
    ev2 = Evidence(
        source="files",
        locator="logs/node-a/app.log:3",
        time=t,
        node="node-a",
        excerpt="Watchdog caught collective operation timeout",
    )
    return AttributionResult(
        job_id=job_id,
        cluster=cluster,
        failed=True,
        status=status,
        category="gpu.lost" if status == "attributed" else None,
        suspect_nodes=["node-b"],
        symptom_chain=[
            ChainLink(
                time=t,
                node="node-b",
                kind="xid",
                role="root_cause",
                summary="XID 79",
                evidence=ev,
                gpu=3,
            ),
            ChainLink(
                time=t,
                node="node-a",
                kind="collective_timeout",
                role="symptom",
                summary="NCCL timeout",
                evidence=ev2,
            ),
        ],
        evidence=[ev, ev2],
        rules_version=rules,
        coverage=[SourceCoverage(source="files:logs", nodes_read=["node-a", "node-b"])],
        analyzed_at=t,
    )


def _urls() -> list:
    params = [pytest.param("sqlite", id="sqlite")]
    params.append(
        pytest.param(
            "postgresql",
            id="postgresql",
            marks=[
                pytest.mark.postgres,
                pytest.mark.skipif(not PG_URL, reason="ATTRIBUTION_TEST_PG_URL is not set"),
            ],
        )
    )
    return params


@pytest.fixture(params=_urls())
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/results.db"
    assert PG_URL
    engine = shared_engine(PG_URL)
    from attribution_dagster.resources.value_store import store_metadata

    sink_metadata.drop_all(engine)
    store_metadata.drop_all(engine)
    return PG_URL


def test_schema_created_on_first_use(db_url):
    sink = SqlSink(db_url)
    tables = set(inspect(sink.engine).get_table_names())
    assert {"attribution_results", "attribution_symptoms", "attribution_evidence"} <= tables
    assert sink.read() == []


def test_write_read_round_trip(db_url):
    sink = SqlSink(db_url)
    original = make_result("101")
    assert sink.write([original]) == 1
    [back] = sink.read(job_id="101")
    assert back == original
    assert back.contract_json() == original.contract_json()


def test_upsert_is_idempotent_per_cluster_job_rules(db_url):
    sink = SqlSink(db_url)
    sink.write([make_result("7")])
    sink.write([make_result("7")])
    sink.write([make_result("7", status="unattributed")])  # re-analysis replaces the row
    assert sink.count() == 1
    [row] = sink.read(job_id="7")
    assert row.status == "unattributed" and row.category is None
    # children were replaced, not appended
    assert len(sink.symptom_rows("7", "c1")) == 2
    assert len(sink.evidence_rows("7", "c1")) == 2
    # the same job id on another cluster, or under other rules, is another row
    sink.write([make_result("7", cluster="c2"), make_result("7", rules="r2")])
    assert sink.count() == 3
    assert {(r.cluster, r.rules_version) for r in sink.read(job_id="7")} == {
        ("c1", "r1"),
        ("c2", "r1"),
        ("c1", "r2"),
    }


def test_no_cluster_is_a_key_too(db_url):
    sink = SqlSink(db_url)
    sink.write([make_result("8", cluster=None)])
    sink.write([make_result("8", cluster=None)])
    assert sink.count() == 1
    assert sink.read(job_id="8")[0].cluster is None


def test_symptoms_and_evidence_rows_are_queryable(db_url):
    sink = SqlSink(db_url)
    sink.write([make_result("9")])
    symptoms = sink.symptom_rows("9", "c1")
    assert [(s["role"], s["kind"], s["node"]) for s in symptoms] == [
        ("root_cause", "xid", "node-b"),
        ("symptom", "collective_timeout", "node-a"),
    ]
    assert symptoms[0]["gpu"] == 3
    with sink.engine.connect() as conn:
        n = conn.execute(
            text(
                "SELECT count(*) FROM attribution_symptoms s JOIN attribution_results r "
                "ON r.id = s.result_id WHERE r.category = :cat AND s.role = 'symptom'"
            ),
            {"cat": "gpu.lost"},
        ).scalar_one()
    assert n == 1
    evidence = sink.evidence_rows("9", "c1")
    assert evidence[0]["locator"] == "logs/node-b/kern.log:7"


def test_log_content_is_data_not_sql(db_url):
    sink = SqlSink(db_url)
    hostile = make_result("10'; DROP TABLE x; --", excerpt=HOSTILE)
    sink.write([hostile, make_result("11")])
    assert sink.count() == 2  # nothing was dropped or deleted
    [back] = sink.read(job_id="10'; DROP TABLE x; --")
    assert back.evidence[0].excerpt == HOSTILE  # exact, NUL included, in the contract JSON
    rows = sink.evidence_rows("10'; DROP TABLE x; --", "c1")
    assert "DROP TABLE attribution_results" in rows[0]["excerpt"]
    assert "\x00" not in rows[0]["excerpt"]  # the queryable column holds no NUL (PostgreSQL)


def test_read_filters(db_url):
    sink = SqlSink(db_url)
    sink.write(
        [
            make_result("20"),
            make_result("21", status="unattributed"),
            make_result("22", cluster="c2"),
        ]
    )
    assert {r.job_id for r in sink.read(category="gpu.lost")} == {"20", "22"}
    assert {r.job_id for r in sink.read(cluster="c2")} == {"22"}
    assert len(sink.read(limit=2)) == 2


def test_concurrent_writers_of_one_key_leave_one_row(db_url):
    sink = SqlSink(db_url)
    errors: list[BaseException] = []

    def write() -> None:
        try:
            for _ in range(5):
                SqlSink(db_url).write([make_result("30")])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=write) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sink.count() == 1
    assert len(sink.symptom_rows("30", "c1")) == 2


def test_asset_store_values_failures_and_case_index(db_url):
    store = AssetValueStore(db_url)
    store.put("raw_evidence", values={"c1.1": '{"a": 1}', "c1.2": '{"b": "\\u0000"}'})
    store.put("raw_evidence", failures={"c1.3": "OSError: disk gone\x00"})
    got = store.get("raw_evidence", ["c1.1", "c1.2", "c1.3", "c1.missing"])
    assert set(got) == {"c1.1", "c1.2", "c1.3"}
    assert got["c1.1"].ok and json.loads(got["c1.1"].payload) == {"a": 1}
    assert not got["c1.3"].ok and got["c1.3"].error.startswith("OSError: disk gone")
    assert store.failures() == {("raw_evidence", "c1.3"): got["c1.3"].error}
    store.put("raw_evidence", values={"c1.3": "{}"})  # a later success replaces the failure
    assert store.failures() == {}
    keys = [f"c.{i}" for i in range(1000)]  # more than one chunk of bound parameters
    store.put("observations", values={k: "[]" for k in keys})
    assert len(store.get("observations", keys)) == 1000
    store.index_cases({"c1.1": "/cases/a", "c1.2": "/cases/b"})
    store.index_cases({"c1.2": "/cases/b2"})
    assert store.case_dirs(["c1.1", "c1.2", "nope"]) == {"c1.1": "/cases/a", "c1.2": "/cases/b2"}


def test_default_sqlite_url_is_absolute_under_dot_attribution(tmp_path):
    url = default_sqlite_url(tmp_path)
    assert url == f"sqlite:///{tmp_path.resolve()}/.attribution/results.db"
    sink = SqlSink(url)  # creates the directory and the schema
    sink.write([make_result("1")])
    assert (tmp_path / ".attribution" / "results.db").is_file()


def test_stdout_sink_prints_contract_json_lines():
    buf = io.StringIO()
    n = StdoutSink(buf).write([make_result("1"), make_result("2", status="unattributed")])
    lines = buf.getvalue().splitlines()
    assert n == 2 and len(lines) == 2
    first = json.loads(lines[0])
    assert CONTRACT_FIELDS <= set(first), CONTRACT_FIELDS - set(first)
    assert json.loads(lines[1])["status"] == "unattributed"


def test_pg_url_given_means_pg_test_really_ran():
    """Guard: in CI the PostgreSQL server must be reachable, not silently skipped."""
    if not PG_URL:
        pytest.skip("ATTRIBUTION_TEST_PG_URL is not set")
    sink = SqlSink(PG_URL)
    assert sink.engine.dialect.name == "postgresql"
    marker = uuid.uuid4().hex
    sink.write([make_result(marker)])
    assert sink.read(job_id=marker)[0].job_id == marker


def test_contract_check_names_what_breaks_the_contract(monkeypatch):
    from attribution_dagster.assets.checks import contract_problems

    good = make_result("1")
    assert contract_problems(good) == []
    bad = good.model_copy(update={"status": "attributed", "category": "gpu.exploded"})
    assert any("outside the taxonomy" in p for p in contract_problems(bad))
    # a serializer that drops a contract field is caught by name
    monkeypatch.setattr(
        AttributionResult,
        "contract_json",
        lambda self, **kw: self.model_dump_json(exclude={"evidence"}, **kw),
    )
    assert any("evidence" in p and "missing" in p for p in contract_problems(good))

"""Switch, switch-port and NVLink-domain offenders across weeks, from the results'
`fault_domain`, on SQLite and (marker `postgres`) on a real PostgreSQL server.

The engine that fills `fault_domain` from a topology is another branch's work: these
tests build AttributionResult objects with `fault_domain` set directly, as the engine will
write them, and write them through the SQL sink with their execution contexts, over a
two-week fleet (2026-W46 and W47) with one older job outside the look-back window.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import pytest

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import (
    AttributionResult,
    ChainLink,
    Evidence,
    FaultDomain,
    FaultPort,
    Suspect,
)
from attribution_dagster.reports import weekly as report
from attribution_dagster.sinks.sql import SqlSink, fault_ports_table, shared_engine
from attribution_dagster.sinks.sql import metadata as sink_metadata

PG_URL = os.environ.get("ATTRIBUTION_TEST_PG_URL")
REQUIRE = os.environ.get("ATTRIBUTION_REQUIRE_SERVICES") == "1"
W46 = datetime(2026, 11, 9, tzinfo=timezone.utc)  # Monday of 2026-W46
W47 = W46 + timedelta(days=7)
CLUSTER = "ib1"


def _ctx(job: str, end: datetime, nodes: list[str], state: str = "FAILED") -> ExecutionContext:
    return ExecutionContext(job_id=job, scheduler="slurm", cluster=CLUSTER, state=state,
                            exit_code=1, start=end - timedelta(hours=2), end=end, nodes=nodes,
                            gpus_per_node=8)


def _result(job: str, when: datetime, category: str, fd: FaultDomain | None, *,
            scope: str = "node", nodes: list[str] | None = None, port: str | None = None,
            rules: str = "r1") -> AttributionResult:
    nodes = nodes or (fd.nodes if fd else ["n0"])
    ev = Evidence(source="files", locator=f"logs/{nodes[0]}/kern.log:1", time=when,
                  node=nodes[0], excerpt="mlx5_core: Port link down")
    chain = [ChainLink(time=when, node=n, kind="ib_link_down", role="root_cause",
                       summary="link down", evidence=ev, port=port) for n in nodes]
    return AttributionResult(
        job_id=job, cluster=CLUSTER, failed=True, status="attributed", category=category,
        suspect_nodes=[] if scope == "shared" else nodes, symptom_chain=chain, evidence=[ev],
        rules_version=rules, scope=scope, fault_domain=fd, analyzed_at=when,
        suspects=[Suspect(node=n, port=port) for n in nodes] if scope == "node" else [],
    )


def _link(node: str, host_port: str, switch: str, switch_port: str) -> FaultDomain:
    return FaultDomain(level="link", name=switch, nodes=[node], ports=[
        FaultPort(node=node, host_port=host_port, switch=switch, switch_port=switch_port)])


def _leaf(switch: str, cabling: dict[str, str]) -> FaultDomain:
    return FaultDomain(level="leaf", name=switch, nodes=sorted(cabling), ports=[
        FaultPort(node=n, host_port="mlx5_0", switch=switch, switch_port=p)
        for n, p in cabling.items()])


def _nvl(name: str, nodes: list[str]) -> FaultDomain:
    return FaultDomain(level="nvlink_domain", name=name, nodes=nodes)


def two_week_fleet(url: str) -> None:
    """W46 and W47: the cable node-a mlx5_0 <-> ib-leaf-07 port 12 fails alone in both
    weeks; leaf ib-leaf-03 fails as a whole in both (ports 1 and 2 both times); NVLink
    domain nvl72-rack-03 in both; in W47 another cable of ib-leaf-07 (port 13). Noise: an
    app error whose result carries a (wrong) fault domain, a W42 failure of port 12 (outside
    four weeks back), and job 4701 written under two rules versions."""
    sink = SqlSink(url)
    t46, t47 = W46 + timedelta(days=2, hours=3), W47 + timedelta(days=3, hours=5)
    jobs = [
        # (job, end, category, fault domain, kwargs)
        ("4601", t46, "network.fabric", _link("node-a", "mlx5_0", "ib-leaf-07", "12"),
         {"port": "mlx5_0"}),
        ("4602", t46 + timedelta(hours=1), "network.fabric",
         _leaf("ib-leaf-03", {"n1": "1", "n2": "2", "n3": "3"}), {"scope": "shared"}),
        ("4603", t46, "gpu.nvlink", _nvl("nvl72-rack-03", ["gb-01", "gb-02"]), {}),
        ("4604", t46, "app.error", _link("n9", "mlx5_0", "ib-leaf-09", "5"), {}),
        ("4701", t47, "network.fabric", _link("node-a", "mlx5_0", "ib-leaf-07", "12"),
         {"port": "mlx5_0"}),
        ("4702", t47 + timedelta(hours=2), "network.fabric",
         _leaf("ib-leaf-03", {"n1": "1", "n2": "2", "n4": "4"}), {"scope": "shared"}),
        ("4703", t47, "gpu.nvlink", _nvl("nvl72-rack-03", ["gb-03", "gb-01"]), {}),
        ("4204", W46 - timedelta(days=25), "network.fabric",
         _link("node-a", "mlx5_0", "ib-leaf-07", "12"), {"port": "mlx5_0"}),
    ]
    for job, end, cat, fd, kw in jobs:
        r = _result(job, end + timedelta(minutes=5), cat, fd, **kw)
        sink.write([r], contexts=[_ctx(job, end, fd.nodes)])
    sink.write([_result("4701", t47, "network.fabric",
                        _link("node-a", "mlx5_0", "ib-leaf-07", "12"), port="mlx5_0",
                        rules="r0")])
    # no scheduler row: this job counts in the week it was analysed (W47)
    sink.write([_result("4705", t47 + timedelta(hours=7), "network.fabric",
                        _link("node-b", "mlx5_1", "ib-leaf-07", "13"), port="mlx5_1")])


def test_same_named_switches_of_two_clusters_are_kept_apart(tmp_path) -> None:
    """`ib-leaf-07 port 5` fails once on cluster ib1 and once on ib2: across the fleet these
    are two cables, each in one job, so neither is a repeat offender."""
    url = f"sqlite:///{tmp_path}/r.db"
    sink = SqlSink(url)
    t = W47 + timedelta(days=1)
    for cluster, job in (("ib1", "9001"), ("ib2", "9002")):
        r = _result(job, t, "network.fabric", _link("node-a", "mlx5_0", "ib-leaf-07", "5"),
                    port="mlx5_0").model_copy(update={"cluster": cluster})
        sink.write([r], contexts=[_ctx(job, t, ["node-a"]).model_copy(update={"cluster": cluster})])
    assert report.fabric_offenders(sink, W47, W47 + timedelta(days=7), None) == []
    one = report.fabric_offenders(sink, W47, W47 + timedelta(days=7), None, min_jobs=1)
    assert sorted(o.name for o in one if o.kind == "switch_port") == [
        "ib1/ib-leaf-07 port 5", "ib2/ib-leaf-07 port 5"]


def test_same_named_nodes_of_two_clusters_are_not_one_repeat_offender(tmp_path) -> None:
    """`node-b` of cluster ib1 and `node-b` of ib2, each suspect once in the week: across the
    fleet they are two nodes, neither a drain candidate; within ib1, two jobs on its node-b
    make it one."""
    url = f"sqlite:///{tmp_path}/r.db"
    sink = SqlSink(url)
    t = W47 + timedelta(days=1)
    for cluster, job in (("ib1", "9101"), ("ib2", "9102"), ("ib1", "9103")):
        r = _result(job, t, "gpu.lost", None, nodes=["node-b"]).model_copy(
            update={"cluster": cluster})
        sink.write([r], contexts=[_ctx(job, t, ["node-b"]).model_copy(update={"cluster": cluster})])
    fleet = report.repeat_offenders(sink, W47, W47 + timedelta(days=7), None)
    assert [(o.kind, o.name, o.jobs) for o in fleet] == [
        ("node", "ib1/node-b", ["ib1/9101", "ib1/9103"])]
    ib2 = report.repeat_offenders(sink, W47, W47 + timedelta(days=7), "ib2")
    assert ib2 == []


def _dbs() -> list:
    return [
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=[
            pytest.mark.postgres,
            pytest.mark.skipif(not PG_URL and not REQUIRE,
                               reason="ATTRIBUTION_TEST_PG_URL is not set")]),
    ]


@pytest.fixture(scope="module", params=_dbs())
def fleet_url(request, tmp_path_factory) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('fabric')}/results.db"
    else:
        if not PG_URL:
            pytest.fail("ATTRIBUTION_REQUIRE_SERVICES=1 but ATTRIBUTION_TEST_PG_URL is not set")
        url = PG_URL
        sink_metadata.drop_all(shared_engine(url))
    two_week_fleet(url)
    return url


def test_fault_domain_is_stored_losslessly_and_by_cable(fleet_url):
    sink = SqlSink(fleet_url)
    [r] = sink.read("4602", cluster=CLUSTER)
    assert r.fault_domain == _leaf("ib-leaf-03", {"n1": "1", "n2": "2", "n3": "3"})
    with sink.engine.connect() as conn:
        rows = conn.execute(fault_ports_table.select().order_by(
            fault_ports_table.c.result_id, fault_ports_table.c.seq)).mappings().all()
    leaf = [(x["level"], x["domain"], x["node"], x["switch"], x["switch_port"]) for x in rows
            if x["domain"] == "ib-leaf-03"]
    assert ("leaf", "ib-leaf-03", "n3", "ib-leaf-03", "3") in leaf and len(leaf) == 6
    nvl = [x for x in rows if x["level"] == "nvlink_domain"]
    assert {x["node"] for x in nvl} == {"gb-01", "gb-02", "gb-03"} and not any(
        x["switch_port"] for x in nvl)
    # writing a job again under the same rules version replaces its rows
    before = len(rows)
    sink.write([sink.read("4601", cluster=CLUSTER)[0]])
    with sink.engine.connect() as conn:
        assert len(conn.execute(fault_ports_table.select()).all()) == before


def test_switch_ports_ranked_across_weeks_and_cable_suspect_marked(fleet_url):
    rep = report.build_report(fleet_url, "2026-W47", CLUSTER)
    found = {(f.kind, f.name): f for f in rep.fabric_offenders}
    port12 = found[("switch_port", "ib-leaf-07 port 12")]
    # two jobs, one per week (4701 once despite two rules versions; 4204 is too old)
    assert port12.jobs == ["ib1/4601", "ib1/4701"]
    assert port12.weeks == {"2026-W46": 1, "2026-W47": 1} and port12.this_week == 1
    assert port12.levels == {"link": 2} and port12.cables == ["node-a mlx5_0"]
    assert port12.cable_suspect
    # the leaf failed as a whole twice: its ports recur, but they point at the switch
    for p in ("1", "2"):
        leaf_port = found[("switch_port", f"ib-leaf-03 port {p}")]
        assert len(leaf_port.jobs) == 2 and not leaf_port.cable_suspect
        assert leaf_port.levels == {"leaf": 2}
    assert ("switch_port", "ib-leaf-03 port 3") not in found  # one job only
    assert ("switch_port", "ib-leaf-07 port 13") not in found
    leaf07 = found[("switch", "ib-leaf-07")]
    assert leaf07.jobs == ["ib1/4601", "ib1/4701", "ib1/4705"]
    assert leaf07.cables == ["node-a mlx5_0", "node-b mlx5_1"]
    assert leaf07.weeks == {"2026-W46": 1, "2026-W47": 2}
    assert found[("switch", "ib-leaf-03")].levels == {"leaf": 2}
    nvl = found[("nvlink_domain", "nvl72-rack-03")]
    assert nvl.jobs == ["ib1/4603", "ib1/4703"] and nvl.categories == {"gpu.nvlink": 2}
    assert ("switch", "ib-leaf-09") not in found  # an app error is no fabric offender
    # ranking: most jobs first, then most weeks
    assert rep.fabric_offenders[0].name == "ib-leaf-07"
    counts = [len(f.jobs) for f in rep.fabric_offenders]
    assert counts == sorted(counts, reverse=True)
    assert [f.name for f in rep.fabric_offenders if f.cable_suspect] == ["ib-leaf-07 port 12"]
    # among equals (2 jobs, 2 weeks, switch ports) the cable suspect comes first
    ports = [f.name for f in rep.fabric_offenders if f.kind == "switch_port"]
    assert ports == ["ib-leaf-07 port 12", "ib-leaf-03 port 1", "ib-leaf-03 port 2"]


def test_this_weeks_switch_offender_is_the_switch_not_a_node_set(fleet_url):
    rep = report.build_report(fleet_url, "2026-W47", CLUSTER)
    switches = rep.offenders_of("switch")
    assert [(o.name, o.jobs) for o in switches] == [("ib-leaf-07", ["ib1/4701", "ib1/4705"])]
    assert not any("@" in o.name for o in rep.offenders)
    # the node-a port and the node blamed once per week are not this week's repeat offenders
    assert not rep.offenders_of("node")


def test_look_back_window_and_single_week(fleet_url):
    """W46's report sees only W43..W46: each offender has one job there, so none."""
    rep = report.build_report(fleet_url, "2026-W46", CLUSTER)
    assert rep.fabric_offenders == []
    one = report.build_report(fleet_url, "2026-W47", CLUSTER, lookback_weeks=1)
    assert [(f.kind, f.name) for f in one.fabric_offenders] == [("switch", "ib-leaf-07")]
    assert not one.fabric_offenders[0].cable_suspect


def test_pages_show_the_cable_suspect_and_recommend_only(fleet_url, tmp_path):
    rep = report.build_report(fleet_url, "2026-W47", CLUSTER)
    paths = report.write_report(rep, tmp_path)
    md = paths["md"].read_text()
    row = next(line for line in md.splitlines() if "ib-leaf-07 port 12" in line)
    assert report.CABLE_SUSPECT in row and "2026-W46 x1, 2026-W47 x1" in row
    leaf_row = next(line for line in md.splitlines() if "ib-leaf-03 port 1 " in line)
    assert report.CABLE_SUSPECT not in leaf_row and "check the switch" in leaf_row
    assert report.RECOMMENDS in md
    html = paths["html"].read_text()
    assert "ib-leaf-07 port 12" in html and report.CABLE_SUSPECT in html
    # the failed jobs of the week with their verdicts, infrastructure first
    assert [f.job for f in rep.failed_jobs[:1]] and all(
        f.failure_class == report.INFRA for f in rep.failed_jobs)
    assert {f.job for f in rep.failed_jobs} == {"ib1/4701", "ib1/4702", "ib1/4703", "ib1/4705"}
    assert "## Failed jobs and their verdicts" in md and "ib1/4702" in md


def test_report_json_holds_the_tables(fleet_url, capsys):
    from attribution_dagster.cli.app import main

    assert main(["report", "--week", "2026-W47", "--cluster", CLUSTER, "--db", fleet_url,
                 "--json"]) != 0  # ib1 is not a configured cluster: an error, no JSON
    assert capsys.readouterr().out == ""
    assert main(["report", "--week", "2026-W47", "--db", fleet_url, "--json"]) == 0
    out = capsys.readouterr().out
    doc = report.ReportJson.model_validate_json(out)  # one JSON object, typed
    assert json.loads(out)["schema_version"] == 1
    assert doc.scope == "fleet" and doc.week == "2026-W47"
    # across the fleet a switch is named with its cluster (switch names are a fabric's own)
    port = next(f for f in doc.fabric_offenders if f.name == "ib1/ib-leaf-07 port 12")
    assert port.cable_suspect and port.recommendation == report.CABLE_SUSPECT
    assert port.weeks == {"2026-W46": 1, "2026-W47": 1}
    sw = next(o for o in doc.offenders if o.kind == "switch")
    assert (sw.name, sw.jobs_hurt) == ("ib1/ib-leaf-07", 2)  # fleet scope: with its cluster
    assert len(doc.failed_jobs) == 4 and doc.this_week.failed == 4
    assert doc.figures["infrastructure failures"] == 4
    assert doc.figures["cable or transceiver suspects"] == 1
    cats = {c.category: (c.failed_jobs, c.previous_failed_jobs) for c in doc.categories}
    # last week's app error is kept at 0 this week (the pages show it as -100%)
    assert cats == {"network.fabric": (3, 2), "gpu.nvlink": (1, 1), "app.error": (0, 1)}
    fabric = next(c for c in doc.categories if c.category == "network.fabric")
    # 4705 has no scheduler row, hence no GPU count: its hours are not known, never 0
    assert fabric.gpu_hours_lost is None and "1 job without a GPU count" in fabric.gpu_hours_text
    assert doc.files == {}


def test_suspect_rows_name_the_switch_when_the_topology_does():
    from attribution_dagster.sinks.sql import suspect_rows

    t = W46 + timedelta(days=1)
    leaf = _result("1", t, "network.fabric", _leaf("ib-leaf-03", {"n1": "1", "n2": "2"}),
                   scope="shared", port="mlx5_0")
    assert [(r["kind"], r["name"], r["node"]) for r in suspect_rows(leaf)] == [
        ("switch", "ib-leaf-03", "n1,n2"),
        ("switch_port", "ib-leaf-03 port 1", "n1"),
        ("switch_port", "ib-leaf-03 port 2", "n2"),
    ]
    # without a fault domain: the old key, port @ nodes hit together
    bare = leaf.model_copy(update={"fault_domain": None})
    assert [(r["kind"], r["name"]) for r in suspect_rows(bare)] == [
        ("switch", "mlx5_0 @ n1,n2")]
    link = _result("2", t, "network.fabric", _link("node-a", "mlx5_0", "ib-leaf-07", "12"),
                   port="mlx5_0")
    assert [(r["kind"], r["name"]) for r in suspect_rows(link)] == [
        ("node", "node-a"), ("port", "node-a/mlx5_0"), ("switch", "ib-leaf-07"),
        ("switch_port", "ib-leaf-07 port 12")]
    nvl = _result("3", t, "gpu.nvlink", _nvl("nvl72-rack-03", ["gb-01", "gb-02"]))
    assert ("nvlink_domain", "nvl72-rack-03") in [(r["kind"], r["name"])
                                                  for r in suspect_rows(nvl)]


def test_report_json_with_out_names_the_files(fleet_url, tmp_path, capsys):
    from attribution_dagster.cli.app import main

    assert main(["report", "--week", "2026-W47", "--db", fleet_url, "--json",
                 "--out", str(tmp_path / "r")]) == 0
    doc = report.ReportJson.model_validate_json(capsys.readouterr().out)
    assert doc.files["html"] == str(tmp_path / "r" / "report.html")
    on_disk = report.ReportJson.model_validate(
        report.report_json(report.WeeklyReport.model_validate_json(
            (tmp_path / "r" / "report.json").read_text())).model_dump())
    assert on_disk.fabric_offenders == doc.fabric_offenders

"""Start the real `dagster-webserver` on a free loopback port and ask its GraphQL API for the
asset graph, the job partitions, the job and the sensor of this code location."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from dagster import DagsterInstance
from dagster_cases import write_case

from attribution_dagster.cli.local_run import run_cases_report

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

QUERY = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
  repositoriesOrError {
    ... on RepositoryConnection { nodes { name jobs { name } sensors { name } } }
  }
  assetNodes {
    assetKey { path }
    dependencyKeys { path }
    isPartitioned
    partitionKeysByDimension { name partitionKeys }
  }
}
"""


JOB_PAGE = """
{
  assetNodes(assetKeys: [{path: ["attribution"]}]) {
    assetPartitionStatuses {
      __typename
      ... on DefaultPartitionStatuses { materializedPartitions }
    }
    assetMaterializations(partitions: ["c1.100"]) {
      partition
      metadataEntries { label ... on TextMetadataEntry { text } }
    }
  }
}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, query: str) -> dict:
    req = urllib.request.Request(
        url,
        data=json.dumps({"query": query}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.mark.slow
def test_webserver_serves_asset_graph_and_job_partitions(tmp_path):
    home = tmp_path / "dagster-home"
    cases = tmp_path / "cases"
    write_case(cases, "a", job_id="100")
    write_case(cases, "b", job_id="101", cluster="west")
    # one batched run into a local instance as `make run` makes it (batched event writes)
    report = run_cases_report(cases, f"sqlite:///{tmp_path}/results.db", instance_dir=home)
    assert report.runs == 1 and len(report.results) == 2
    with DagsterInstance.from_config(str(home)) as instance:
        assert type(instance.event_log_storage).__name__ == "BatchedSqliteEventLogStorage"

    port = free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "ATTRIBUTION_CASE_ROOT": str(cases),
        "ATTRIBUTION_SINK_URL": f"sqlite:///{tmp_path}/results.db",
        "ATTRIBUTION_SENSOR_ENABLED": "0",
    }
    env.pop("ATTRIBUTION_CONFIG", None)
    log = open(tmp_path / "webserver.log", "wb")
    proc = subprocess.Popen(
        [
            str(BIN / "dagster-webserver"),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-w",
            str(REPO / "workspace.yaml"),
        ],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, (tmp_path / "webserver.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{base}/server_info", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            assert time.monotonic() < deadline, "webserver did not come up in 120 s"
            time.sleep(0.5)
        # the code location may still be loading right after the server answers
        while True:
            data = post(f"{base}/graphql", QUERY)["data"]
            entries = data["workspaceOrError"]["locationEntries"]
            if entries and entries[0]["locationOrLoadError"] is not None:
                break
            assert time.monotonic() < deadline, "code location did not load"
            time.sleep(0.5)

        [entry] = entries
        assert entry["name"] == "attribution_dagster"
        assert entry["locationOrLoadError"]["__typename"] == "RepositoryLocation", entry
        [repo] = data["repositoriesOrError"]["nodes"]
        assert {j["name"] for j in repo["jobs"]} >= {"attribute_job"}
        assert sorted(s["name"] for s in repo["sensors"]) == [
            "case_directory_sensor",
            "job_partition_retention_sensor",
        ]
        nodes = {"/".join(n["assetKey"]["path"]): n for n in data["assetNodes"]}
        per_job = {"execution_context", "raw_evidence", "observations", "attribution"}
        fleet = {"finished_jobs", "window_attributions", "weekly_report"}  # docs/fleet.md
        assert set(nodes) == per_job | fleet
        nodes = {k: n for k, n in nodes.items() if k in per_job}
        deps = {k: {"/".join(d["path"]) for d in n["dependencyKeys"]} for k, n in nodes.items()}
        assert deps == {
            "execution_context": set(),
            "raw_evidence": {"execution_context"},
            "observations": {"raw_evidence"},
            "attribution": {"observations"},
        }
        for node in nodes.values():
            assert node["isPartitioned"]
            [dim] = node["partitionKeysByDimension"]
            assert sorted(dim["partitionKeys"]) == ["c1.100", "west.101"]

        # what a job's page shows: both partitions materialized, the job's own verdict
        [node] = post(f"{base}/graphql", JOB_PAGE)["data"]["assetNodes"]
        statuses = node["assetPartitionStatuses"]
        assert sorted(statuses["materializedPartitions"]) == ["c1.100", "west.101"]
        [event] = node["assetMaterializations"]
        assert event["partition"] == "c1.100"
        meta = {e["label"]: e.get("text") for e in event["metadataEntries"]}
        assert meta["category"] == "gpu.lost" and meta["status"] == "attributed"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()

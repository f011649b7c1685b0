"""Verdicts at a glance (issue 19 item 1), read back from a real Dagster instance.

Samples run through the per-job assets as `make run` runs them (`run_cases_report`: one
batched run, and a single-partition run as the sensor path makes), then a day of them
through the window assets. What the UI shows is what the instance holds: each partition's
latest materialization (verdict first, then counts) and its `verdict_needs_no_look` check
evaluation (a WARN on ambiguous, unattributed and partial data).
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from dagster import (
    AssetCheckKey,
    AssetCheckSeverity,
    AssetKey,
    AssetRecordsFilter,
    DagsterInstance,
    MultiPartitionKey,
    materialize,
)

from attribution_dagster.assets.checks import VERDICT_CHECK
from attribution_dagster.assets.per_window import CLUSTER_DIM, WINDOW_DIM, build_window_assets
from attribution_dagster.cli.local_run import run_cases_report
from attribution_dagster.core.config import load_config
from attribution_dagster.core.context import job_partition_key
from attribution_dagster.core.result import AttributionResult
from attribution_dagster.definitions import build_resources
from attribution_dagster.reports.render import render_result

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
BATCH = ("ambiguous-xid-and-ib", "unattributed-only-symptoms", "xid79-32node-nccl-timeouts")
SINGLE = "kueue-oomkilled"  # a Kueue job: `namespace/name`, a cleaned key with a hash
VERDICT_FIRST = ["status", "category", "look first at", "suspects"]


def copy_cases(root: Path, names: tuple[str, ...] | list[str]) -> Path:
    root.mkdir(parents=True)
    for n in names:
        shutil.copytree(SAMPLES / n, root / n)
    return root


def latest(instance: DagsterInstance, asset: str, partition: str) -> dict:
    [rec] = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    return {k: v.value for k, v in rec.asset_materialization.metadata.items()}


def verdict_checks(instance: DagsterInstance, asset: str) -> dict[str, object]:
    """partition -> its latest evaluation of VERDICT_CHECK, which must be current: it names
    the partition's latest materialization, or the check's partition bar shows it missing."""
    key = AssetCheckKey(AssetKey(asset), VERDICT_CHECK)
    out: dict[str, object] = {}
    for rec in instance.event_log_storage.get_asset_check_execution_history(key, limit=100):
        ev = rec.event.dagster_event.event_specific_data
        out.setdefault(ev.partition, ev)  # newest first
    infos = instance.event_log_storage.get_asset_check_partition_info([key], None)
    assert {i.partition_key for i in infos} == set(out)
    for info in infos:
        assert info.is_current and info.latest_materialization_storage_id, info
        failed = info.latest_execution_status.value == "FAILED"
        assert failed is (not out[info.partition_key].passed)
    return out


def cli_look_first(result: AttributionResult) -> str | None:
    """The `look first at:` line `attribution analyze` prints, without its label."""
    for line in render_result(result).splitlines():
        if line.strip().startswith("look first at:"):
            return line.split(":", 1)[1].strip()
    return None


def test_job_partitions_carry_the_verdict_first_and_a_check_per_partition(tmp_path):
    home = tmp_path / "home"
    batch = run_cases_report(
        copy_cases(tmp_path / "batch", BATCH), f"sqlite:///{tmp_path}/r.db", instance_dir=home
    )
    single = run_cases_report(
        copy_cases(tmp_path / "single", [SINGLE]), f"sqlite:///{tmp_path}/r.db",
        instance_dir=home,
    )
    assert (batch.runs, single.runs) == (1, 1) and not batch.failed and not single.failed
    results = {job_partition_key(r.cluster, r.job_id): r for r in batch.results + single.results}
    assert {r.status for r in results.values()} >= {"ambiguous", "unattributed", "attributed"}
    with DagsterInstance.from_config(str(home)) as instance:
        checks = verdict_checks(instance, "attribution")
        for key in batch.partitions + single.partitions:
            meta = latest(instance, "attribution", key)
            result = results[key]
            # the verdict is what the UI lists first, before any count
            assert list(meta)[:4] == VERDICT_FIRST, key
            assert meta["status"] == result.status
            assert meta["job"] == f"{result.cluster}/{result.job_id}"
            cli = cli_look_first(result)
            if cli is not None:
                assert meta["look first at"] == cli
            if result.status == "attributed":
                assert meta["category"] == result.category
                assert meta["confidence"] == round(result.confidence, 4)
            elif result.status == "ambiguous":
                fits = {c.category for c in result.candidates}
                assert set(meta["category"].split(" or ")) == fits
                assert meta["look first at"] == ", ".join(result.suspect_nodes)
            # one check evaluation per partition, a WARN when the job needs a look
            ev = checks[key]
            needs = result.status in ("ambiguous", "unattributed") or meta["partial data"]
            assert ev.passed is (not needs), (key, ev.description)
            assert ev.severity == AssetCheckSeverity.WARN
            if result.status in ("ambiguous", "unattributed"):
                assert ev.description.startswith(result.status)
        # the Kueue job's key is short, stable and marked as cleaned; its name is whole
        [kueue_key] = single.partitions
        assert kueue_key.startswith("gke-a3-mega-usc1.team-llm_sft-llama-8b-x7k2p~")
        assert latest(instance, "attribution", kueue_key)["job"] == (
            "gke-a3-mega-usc1/team-llm/sft-llama-8b-x7k2p"
        )
        assert checks[kueue_key].passed


def test_window_partition_lists_its_jobs_needing_a_look_first(tmp_path):
    """A day of two jobs (an ambiguous one and a hang) through finished_jobs ->
    window_attributions: counts, a typed job table (ambiguous first) and a WARN check."""
    day = "2026-11-07"
    cases = copy_cases(tmp_path / "cases", ["hang-straggler-xid79", "ambiguous-xid-and-ib"])
    cfg = tmp_path / "attribution.yaml"
    cfg.write_text(
        "clusters:\n  lab:\n"
        f"    scheduler: {{kind: static, path: {cases}}}\n    sensor: false\n"
        f"sink:\n  url: sqlite:///{tmp_path}/results.db\n"
        'fleet:\n  window: daily\n  start: "2026-11-01"\n  workers: 1\n'
        f"  reports_dir: {tmp_path}/reports\n"
    )
    config = load_config(cfg)
    key = MultiPartitionKey({CLUSTER_DIM: "lab", WINDOW_DIM: day})
    with DagsterInstance.ephemeral() as instance, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = materialize(
            build_window_assets(config), instance=instance, partition_key=key,
            resources=build_resources(config),
        )
        assert result.success
        meta = latest(instance, "window_attributions", str(key))
        assert list(meta)[0] == "jobs needing a look"
        assert meta["jobs"] == 2 and meta["ambiguous"] == 1
        assert meta["jobs needing a look"] == meta["ambiguous"] + meta["unattributed"]
        table = meta["jobs by verdict"]
        assert [c.name for c in table.schema.columns] == [
            "job", "status", "category", "look first at", "confidence", "partial data"
        ]
        rows = [r.data for r in table.records]
        assert len(rows) == 2 and rows[0]["status"] == "ambiguous"
        assert rows[0]["category"] == "gpu.lost or network.fabric"
        statuses = {r["status"] for r in rows}
        assert meta["attributed"] == sum(1 for r in rows if r["status"] == "attributed")
        [ev] = verdict_checks(instance, "window_attributions").values()
        assert ev.partition == str(key) and not ev.passed
        assert "1 ambiguous" in ev.description
        assert statuses <= {"ambiguous", "unattributed", "attributed", "not_failed"}

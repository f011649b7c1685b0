"""Every path gives `attribution analyze`'s full result (issue 15, item 1).

The harness (tests/paths_harness.py) runs every sample and every held-out case
(tests/heldout/*, nested folders such as tests/heldout/real-threads/* included) through each
path and compares the whole result JSON with `analyze --json`: status, category, candidates,
suspects, confidence, the symptom chain with its locators, evidence, notes and coverage. Only
`analyzed_at` is dropped. A disagreement names the case, the field and both values.

The Dagster paths load `attribution_dagster.definitions:defs` as workspace.yaml does (the
module, configured by an ATTRIBUTION_CONFIG file the harness writes) and run on one real
SQLite instance in a temporary DAGSTER_HOME.

Which cases run on which path (CI budget, 2 cores; measured ~0.8 s per Dagster run):

- every case: `run --direct`; `run` through the per-job assets in process (a few batched
  runs); the per-job assets out of process (`dagster job execute` on the code location,
  100 partitions per run, as the backfill policy batches them); `backfill --direct`;
  `export` then `analyze`.
- the window-partition assets (one run per cluster and span of days, about 70 runs):
  every case that ended before now. A window after today is not a partition of the window
  assets yet, so no Dagster path can attribute a job dated in the future (two held-out
  cases end on 2027-01-01); `backfill --direct` can.
- the sensor path (one tick of `case_directory_sensor`, then each run request it made for
  the chosen cases as its own single-partition run, as the daemon launches them): every
  sample and every `SENSOR_EVERY`-th held-out case. All cases agree too (checked by
  `python tests/paths_harness.py sensor`), but a run per case costs about 2 minutes.
- a run started by a cluster's `<cluster>_finished_jobs_sensor` (the static scheduler's
  contexts, indexed by the sensor): the cases of `SCHEDULER_SENSOR_CLUSTERS` (Kueue jobs
  whose ids hold a slash, and Slurm jobs over several days), one run each.
- `backfill` through Dagster (one run per cluster and day): every case of the clusters in
  `BACKFILL_CLUSTERS`: the held-out set's own cluster (83 cases on one day), Kueue jobs
  whose ids hold a slash, and clusters with cases on several days (none in the future).
"""

from __future__ import annotations

import shutil
from datetime import datetime, timezone

import paths_harness as h
import pytest

SENSOR_EVERY = 5
SCHEDULER_SENSOR_CLUSTERS = ("gke-a3-mega-usc1", "cn-g", "a100-lab")
BACKFILL_CLUSTERS = ("heldout", "gke-a3-mega-usc1", "cn-g", "a100-lab", "ws")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return h.Env(tmp_path_factory.mktemp("paths"), h.discover())


@pytest.fixture(scope="module")
def reference(env):
    return h.path_analyze(env, env.cases)


def test_every_case_is_compared(env):
    names = {c.name for c in env.cases}
    samples = {p.parent.name for p in h.SAMPLES.glob("*/context.json")}
    heldout = {
        p.parent.relative_to(h.HELDOUT).as_posix() for p in h.HELDOUT.rglob("context.json")
    }
    assert names == {f"samples/{n}" for n in samples} | {f"tests/heldout/{n}" for n in heldout}
    assert len(samples) >= 30 and len(heldout) >= 140


def _cases(env, path: str) -> list[h.Case]:
    if path == "sensor":
        heldout = [c for c in env.cases if not c.name.startswith("samples/")]
        chosen = [c for c in env.cases if c.name.startswith("samples/")] + heldout[::SENSOR_EVERY]
        assert len(chosen) >= 50
        return chosen
    past = [c for c in env.cases if c.ctx.end < datetime.now(timezone.utc)]
    if path == "scheduler_sensor":
        chosen = [c for c in env.cases if c.cluster in SCHEDULER_SENSOR_CLUSTERS]
        assert len(chosen) >= 5
        return chosen
    if path == "backfill_dagster":
        chosen = [c for c in past if c.cluster in BACKFILL_CLUSTERS]
        assert len(chosen) >= 90
        return chosen
    if path == "window":
        assert len(past) >= len(env.cases) - 2
        return past
    return env.cases


@pytest.mark.parametrize("path", h.PATHS)
def test_path_agrees_with_analyze(env, reference, path):
    cases = _cases(env, path)
    got = h.RUNNERS[path](env, cases)
    assert set(got) == {c.name for c in cases}
    differences = h.compare(reference, got, h.NORMALIZE.get(path))
    assert not differences, h.report(path, differences, len(cases))


def test_a_difference_is_reported_with_case_and_field(env, reference):
    """The comparison is not vacuous: a changed field of one case is named."""
    name = env.cases[0].name
    changed = {**reference[name], "confidence": -1.0}
    chain = [dict(link) for link in reference[name]["symptom_chain"]]
    if chain:
        chain[0] = {**chain[0], "evidence": {**chain[0]["evidence"], "locator": "x:0"}}
        changed["symptom_chain"] = chain
    differences = h.compare(reference, {name: changed, env.cases[1].name: None})
    text = h.report("probe", differences, 2)
    assert "confidence: " in text and "-1.0" in text and name in text
    assert ("symptom_chain[0].evidence.locator" in text) == bool(chain)
    assert "no result from this path" in text


def test_a_case_with_one_kind_of_evidence_takes_the_other_from_its_cluster(tmp_path):
    """A case holding its metrics but not its logs, on a cluster whose logs live on a
    `files` back-end: every path reads the case's metrics AND the back-end's logs (the
    Dagster assets always did; `analyze` and `run --direct` used to ignore the back-end)."""
    src = h.SAMPLES / "metrics-only-cause"
    case = tmp_path / "cases" / "metrics-here-logs-there"
    case.mkdir(parents=True)
    shutil.copy(src / "context.json", case / "context.json")
    shutil.copytree(src / "metrics", case / "metrics")
    shutil.copytree(src / "logs", tmp_path / "logroot")
    cases = h.discover([tmp_path / "cases"])
    env = h.Env(tmp_path / "env", cases, extra={cases[0].cluster: {"logs": [
        {"kind": "files", "root": str(tmp_path / "logroot"), "paths": ["{node}/*"]}]}})
    reference = h.path_analyze(env, cases)
    result = reference[cases[0].name]
    assert "files:metrics" in {c["source"] for c in result["coverage"]}
    # the back-end's log lines are in the chain, besides the case's metric samples
    locators = [link["evidence"]["locator"] for link in result["symptom_chain"]]
    assert any("/logroot/node-" in loc for loc in locators), locators
    assert any(loc.startswith("metrics/") for loc in locators), locators
    assert reference[cases[0].name]["category"] == "gpu.lost"
    for path in ("run_direct", "run_dagster", "window", "backfill_direct"):
        differences = h.compare(reference, h.RUNNERS[path](env, cases))
        assert not differences, h.report(path, differences, 1)

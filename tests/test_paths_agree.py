"""Every path gives `attribution analyze`'s full result (issue 15, item 1).

The harness (tests/paths_harness.py) runs every sample and every held-out case
(tests/heldout/*, nested folders such as tests/heldout/real-threads/* included) through each
path and compares the whole result JSON with `analyze --json`: status, category, candidates,
suspects, confidence, the symptom chain with its locators, evidence, notes and coverage. Only
`analyzed_at` is dropped. A disagreement names the case, the field and both values.

The Dagster paths load `attribution_dagster.definitions:defs` as workspace.yaml does (the
module, configured by an ATTRIBUTION_CONFIG file the harness writes) and run on one real
SQLite instance in a temporary DAGSTER_HOME.

Which cases run on which path (CI budget, 2 cores):

- every case: `run --direct`; `run` through the per-job assets in process (a few batched
  runs); the per-job assets out of process (`dagster job execute` on the code location,
  100 partitions per run, as the backfill policy batches them); the sensor path (one tick
  of `case_directory_sensor`, then each of its run requests as its own single-partition
  run: about 0.1 s a job); `backfill --direct`; `export` then `analyze`.
- the window-partition assets and `backfill` through Dagster cost one Dagster run per
  cluster and window (0.5-1 s each) and the cases span 63 clusters: they run every case of
  the clusters in `WINDOW_CLUSTERS` (the held-out set's own cluster and the sample clusters
  with several cases over several days), one run per cluster and span of days.
"""

from __future__ import annotations

import pytest

import paths_harness as h

WINDOW_CLUSTERS = ("heldout", "h100-iad2", "h100-sc2", "a100-lab")


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
    if path in ("window", "backfill_dagster"):
        chosen = [c for c in env.cases if c.cluster in WINDOW_CLUSTERS]
        assert len(chosen) >= 90
        return chosen
    return env.cases


@pytest.mark.parametrize("path", h.PATHS)
def test_path_agrees_with_analyze(env, reference, path):
    cases = _cases(env, path)
    got = h.RUNNERS[path](env, cases)
    assert set(got) == {c.name for c in cases}
    differences = h.compare(reference, got)
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

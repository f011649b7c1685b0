"""bench/quality.py (issue 17 item 4): the field's measures, and the Dagster per-job path
answering as `attribution analyze` does on the cases where they used to differ."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import quality  # noqa: E402

HELDOUT = ROOT / "tests" / "heldout"


def test_measures_on_hand_made_answers() -> None:
    s = quality.Scores()
    attributed = {"failed": True, "status": "attributed", "category": "gpu.lost"}
    s.add(
        "right",
        {**attributed, "suspect_nodes": ["a"]},
        quality.Got(True, "attributed", "gpu.lost", ["a"]),
    )
    s.add(
        "second",
        {**attributed, "suspect_nodes": ["b"]},
        quality.Got(True, "attributed", "gpu.lost", ["a", "b"]),
    )
    s.add(
        "wrong",
        {**attributed, "suspect_nodes": ["c"]},
        quality.Got(True, "attributed", "app.error", ["d"]),
    )
    s.add(
        "abstains",
        {"failed": True, "status": "unattributed", "category": None, "suspect_nodes": []},
        quality.Got(True, "ambiguous", None, []),
    )
    s.add(
        "confident",
        {"failed": True, "status": "unattributed", "category": None, "suspect_nodes": []},
        quality.Got(True, "attributed", "app.gpu_oom", ["x"]),
    )
    assert (s.n, s.exact) == (5, 1)
    assert (s.located, s.top1, s.top3) == (3, 1, 2)
    assert (s.failed_jobs, s.abstained) == (5, 1)
    assert (s.attributed, s.false_attributed) == (4, 2)
    assert s.tp["gpu.lost"] == 2 and s.predicted["gpu.lost"] == 2 and s.labelled["gpu.lost"] == 3
    assert s.predicted["app.error"] == 1 and s.tp["app.error"] == 0


@pytest.mark.parametrize(
    "names",
    [
        # a node goes silent (file tails), training went on after a fault (progress lines)
        ["h114-two-nodes-one-silent-gloo-by-ip", "h105-timeout-after-link-flap-training-continued"],
    ],
)
def test_dagster_path_answers_as_the_direct_path(names: list[str]) -> None:
    cases = [HELDOUT / name for name in names]
    got = quality.dagster(cases)
    want = quality.direct(cases)
    for case in cases:
        assert got[case] == want[case], case.name
        assert got[case].status != "error"

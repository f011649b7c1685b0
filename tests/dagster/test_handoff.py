"""The in-process handoff between per-job steps (assets/job_batch.py `Handoff`): a value a
step stored is taken by the next step of the same process without parsing its JSON back,
once, and only when the text read from the store is the text stored with it; otherwise,
and past the budget, the stored text is parsed. A real run of the per-job assets gives the
same verdicts with the handoff as without it."""

from __future__ import annotations

import warnings
from pathlib import Path

from dagster_cases import write_case

from attribution_dagster.assets import job_batch
from attribution_dagster.assets.job_batch import Handoff
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import RawEvidence, SourceCoverage


def _raw(job: str, n: int = 3) -> RawEvidence:
    return RawEvidence(
        job_id=job,
        coverage=[SourceCoverage(source="files:logs", status="ok", files=n, lines=10 * n)],
    )


def test_a_stored_value_is_taken_once_as_the_same_object() -> None:
    h = Handoff()
    value = _raw("j1")
    text = value.model_dump_json()
    h.keep("p1", text, value)
    got = h.take(RawEvidence, "p1", text)
    assert got is value
    again = h.take(RawEvidence, "p1", text)  # taken already: parsed from the text
    assert again is not value and again == value


def test_other_text_another_type_or_key_is_parsed_from_the_text() -> None:
    h = Handoff()
    value = _raw("j1")
    h.keep("p1", value.model_dump_json(), value)
    newer = _raw("j1", n=5)
    got = h.take(RawEvidence, "p1", newer.model_dump_json())  # the store holds another value
    assert got == newer and got is not value
    h.keep("p1", value.model_dump_json(), value)
    assert h.take(RawEvidence, "p2", value.model_dump_json()) is not value
    ctx = ExecutionContext.model_validate(
        {
            "job_id": "1",
            "scheduler": "static",
            "state": "FAILED",
            "nodes": ["a"],
            "start": "2026-11-02T10:00:00Z",
            "end": "2026-11-02T11:00:00Z",
        }
    )
    h.keep("p3", ctx.model_dump_json(), ctx)
    assert h.take(RawEvidence, "p3", value.model_dump_json()) == value  # not the context


def test_the_budget_drops_the_oldest_values() -> None:
    values = [_raw(f"j{i}") for i in range(4)]
    texts = [v.model_dump_json() for v in values]
    h = Handoff(budget=len(texts[0]) * 2 + 10)
    for i, (v, t) in enumerate(zip(values, texts, strict=True)):
        h.keep(f"p{i}", t, v)
    assert h.take(RawEvidence, "p0", texts[0]) is not values[0]  # dropped: parsed
    assert h.take(RawEvidence, "p3", texts[3]) is values[3]
    big = Handoff(budget=5)
    big.keep("p0", texts[0], values[0])  # larger than the whole budget: not held
    assert big.take(RawEvidence, "p0", texts[0]) is not values[0]


def test_per_job_runs_give_the_same_verdicts_with_and_without_the_handoff(
    tmp_path: Path, monkeypatch
) -> None:
    from attribution_dagster.cli.local_run import run_cases

    root = tmp_path / "cases"
    for i in range(3):
        write_case(root, f"case-{i}", job_id=str(700 + i), bad_node="node-b" if i else None)
    taken: list[bool] = []  # per take: was it handed over (not parsed)?
    real_take = Handoff.take

    def counting(self, model, key, text):  # type: ignore[no-untyped-def]
        held = self._held.get((model, key))
        got = real_take(self, model, key, text)
        taken.append(held is not None and got is held[1])
        return got

    monkeypatch.setattr(Handoff, "take", counting)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with_handoff = run_cases(root, f"sqlite:///{tmp_path}/a.db", instance_dir=tmp_path / "i1")
        monkeypatch.setattr(job_batch.HANDOFF, "budget", 0)  # every value parsed back
        without = run_cases(root, f"sqlite:///{tmp_path}/b.db", instance_dir=tmp_path / "i2")
    # raw evidence and observations of 3 jobs, handed over in the first run, parsed in the
    # second
    assert taken == [True] * 6 + [False] * 6
    strip = {"analyzed_at"}
    a = sorted((r.model_dump(mode="json", exclude=strip) for r in with_handoff), key=str)
    b = sorted((r.model_dump(mode="json", exclude=strip) for r in without), key=str)
    assert a == b and len(a) == 3

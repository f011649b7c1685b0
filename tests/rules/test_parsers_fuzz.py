"""Property tests: the normalizer never raises, whatever text or samples it is given."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample, RawEvidence, RawRecord
from attribution_dagster.core.locators import Note
from attribution_dagster.rules.parsers import load_catalog
from attribution_dagster.rules.vocabulary import vocabulary

CAT = load_catalog()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
CTX = ExecutionContext(
    job_id="1",
    scheduler="slurm",
    state="FAILED",
    start=T0,
    end=T0 + timedelta(hours=1),
    nodes=["node-a", "node-b"],
)
ANCHORS = [a.literal for a in CAT.anchors()]
REAL_LINES = [ex.line for p in CAT.parsers for ex in p.spec.examples] + list(CAT.noise)
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check(text: str, node: str = "node-a") -> None:
    rec = RawRecord(source="files", node=node, locator="f:1", time=T0, text=text)
    for obs in CAT.parse_record(rec, CTX):
        assert obs.kind in vocabulary().kinds
        assert len(obs.excerpt) <= 300
        assert str(obs.locator) == "f:1" and obs.source == "files"
        assert obs.node in ("node-a", "node-b")
    kinds = [o.kind for o in CAT.parse_record(rec, CTX)]
    assert len(kinds) == len(set(kinds)), "one observation per kind per line"


@FUZZ
@given(st.text())
def test_arbitrary_text(text: str) -> None:
    check(text)


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes_decoded_with_replacement(data: bytes) -> None:
    check(data.decode("utf-8", errors="replace"))


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(ANCHORS), st.text(max_size=30)), max_size=12))
def test_anchor_soup(parts: list[str]) -> None:
    """Anchors glued to random text reach every regex and decoder."""
    check(" ".join(parts))
    check("".join(parts))


@FUZZ
@given(st.sampled_from(REAL_LINES), st.data())
def test_real_lines_randomly_truncated_or_mutated(line: str, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(line)))
    check(line[:cut])
    pos = data.draw(st.integers(min_value=0, max_value=len(line)))
    junk = data.draw(st.text(max_size=8))
    check(line[:pos] + junk + line[pos:])
    check(line + "\n" + data.draw(st.text(max_size=200)))


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.sampled_from(
                [m for spec in CAT.metric_specs for m in spec.names] + ["other_metric"]
            ),
            st.floats(allow_nan=True, allow_infinity=True),
            st.integers(min_value=-100000, max_value=100000),
            st.dictionaries(
                st.sampled_from(
                    ["gpu", "pci_bus_id", "Hostname", "instance", "device", "port", "node"]
                ),
                st.text(max_size=12),
                max_size=4,
            ),
        ),
        max_size=30,
    )
)
def test_arbitrary_metric_samples(items: list[tuple[str, float, int, dict[str, str]]]) -> None:
    # MetricSample refuses NaN / inf (they cannot cross a JSON boundary); the normalizer must
    # still tolerate them, so those are built unchecked
    samples = [
        (MetricSample if math.isfinite(v) else MetricSample.model_construct)(
            source="files",
            node="node-a",
            locator=Note(text=f"m:{i}"),
            time=T0 + timedelta(seconds=s),
            name=n,
            labels=lab,
            value=v,
        )
        for i, (n, v, s, lab) in enumerate(items)
    ]
    obs = CAT.normalize(RawEvidence(job_id="1", samples=samples), CTX)
    assert all(o.kind in vocabulary().kinds for o in obs)


def test_long_lines_with_many_anchors_stay_fast() -> None:
    """No catastrophic backtracking: 64 KiB lines full of anchors parse quickly."""
    t = time.perf_counter()
    for lit in ANCHORS:
        check((lit + " x " * 7) * (65536 // (len(lit) + 21)))
        check(lit + " " + "a" * 65000)
    assert time.perf_counter() - t < 20

"""context.json written by other tools (issue 17 item 2): any extra field, of any JSON type, is
accepted and ignored (spec section 1). A field the spec does not define is never a reason to
reject a context, even where this tool has an optional field of that name with another type
(another tool's `"pods": {...}` object)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attribution_dagster.connectors.static.client import (
    SPEC_FIELDS,
    ContextError,
    StaticContextClient,
    validate_context,
)
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.pipeline import analyze_context

SAMPLES = Path(__file__).resolve().parents[2] / "samples"
CASES = sorted(
    p.parent for p in SAMPLES.glob("*/context.json") if (p.parent / "expected.json").is_file()
)
MODEL_FIELDS = set(ExecutionContext.model_fields)

json_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
extra_names = st.text(min_size=1, max_size=16).filter(lambda k: k not in MODEL_FIELDS)


def _outcome(res: Any) -> dict[str, Any]:
    return res.model_dump(mode="json", exclude={"analyzed_at"})


@cache
def _base(case: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    data = json.loads((case / "context.json").read_text())
    ctx = StaticContextClient().load(case)
    return data, _outcome(analyze_context(ctx, case=case))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    case=st.sampled_from(CASES),
    extras=st.dictionaries(extra_names, json_values, min_size=1, max_size=5),
)
def test_random_extra_fields_change_nothing(
    tmp_path_factory: pytest.TempPathFactory, case: Path, extras: dict
) -> None:
    data, want = _base(case)
    where = tmp_path_factory.mktemp("ctx")
    (where / "context.json").write_text(json.dumps({**data, **extras}))
    ctx = StaticContextClient().load(where)
    assert ctx.model_extra is not None and all(ctx.model_extra[k] == v for k, v in extras.items())
    assert _outcome(analyze_context(ctx, case=case)) == want


@pytest.mark.parametrize(
    "extra",
    [
        {"pods": {"w-0": {"role": "worker", "containers": ["pytorch"]}}},
        {"pods": "w-0,m-0"},
        {"gpus_per_node": "eight", "partition": ["a", "b"], "case_dir": 5},
        {"user": {"name": "x"}, "reason": 3, "stdout_path": None, "started": [1, 2]},
    ],
)
def test_non_spec_fields_of_another_type_are_ignored(tmp_path: Path, extra: dict) -> None:
    case = next(c for c in CASES if c.name == "app-cuda-oom")
    data, want = _base(case)
    (tmp_path / "context.json").write_text(json.dumps({**data, **extra}))
    ctx = StaticContextClient().load(tmp_path)
    assert _outcome(analyze_context(ctx, case=case)) == want


def test_spec_fields_are_still_checked() -> None:
    assert {"job_id", "nodes", "node_addresses"} <= SPEC_FIELDS
    base = json.loads((SAMPLES / "app-cuda-oom" / "context.json").read_text())
    with pytest.raises(ValueError):
        validate_context({**base, "nodes": {"a": 1}, "pods": {"x": 1}})


def test_static_client_names_a_bad_spec_field(tmp_path: Path) -> None:
    base = json.loads((SAMPLES / "app-cuda-oom" / "context.json").read_text())
    (tmp_path / "context.json").write_text(json.dumps({**base, "node_addresses": [1], "pods": {}}))
    with pytest.raises(ContextError, match="node_addresses"):
        StaticContextClient().load(tmp_path)

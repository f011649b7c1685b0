"""core.construct: the hot-loop builder gives what pydantic's model_construct gives."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pydantic import BaseModel, Field

from attribution_dagster.core.construct import constructor
from attribution_dagster.core.evidence import RawRecord
from attribution_dagster.core.locators import FileLine

T = datetime(2026, 11, 2, 10, 3, 11, tzinfo=timezone.utc)


def test_a_built_record_equals_model_construct_and_round_trips() -> None:
    values = dict(source="files", node="node-b", time=T, time_quality="exact",
                  text="NVRM: Xid (PCI:0000:1b:00): 79", stream="kern.log", count=3)
    a = RawRecord.model_construct(
        locator=FileLine.model_construct(root="case", path="logs/node-b/kern.log", line=9),
        **values,
    )
    b = constructor(RawRecord)(
        locator=constructor(FileLine)(root="case", path="logs/node-b/kern.log", line=9),
        **values,
    )
    assert a == b
    assert a.model_dump_json() == b.model_dump_json()  # same field order, same defaults
    assert b.model_fields_set == a.model_fields_set
    assert RawRecord.model_validate_json(b.model_dump_json()) == b
    assert (b.count, b.last_of_file, b.locator.render()) == (3, False, "logs/node-b/kern.log:9")


def test_a_missing_required_field_is_refused() -> None:
    with pytest.raises(TypeError, match="missing"):
        constructor(RawRecord)(source="files", node="n", text="x")


def test_models_with_mutable_defaults_are_refused() -> None:
    class WithList(BaseModel):
        items: list[int] = Field(default_factory=list)

    with pytest.raises(TypeError, match="default factory"):
        constructor(WithList)


def test_frozen_models_share_their_fields_set_and_copies_stay_apart() -> None:
    """Built records of one call shape share one `fields_set` (a third of their memory);
    model_copy gives the copy its own, so the shared one never changes."""
    build = constructor(RawRecord)
    line = constructor(FileLine)
    a, b = (build(source="files", node="n", locator=line(root="r", path="p", line=i), time=T,
                  text="x") for i in (1, 2))
    assert a.model_fields_set is b.model_fields_set
    c = a.model_copy(update={"count": 4})
    assert "count" in c.model_fields_set and "count" not in a.model_fields_set
    assert a.model_fields_set == {"source", "node", "locator", "time", "text"}

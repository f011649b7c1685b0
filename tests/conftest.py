from __future__ import annotations

from pathlib import Path

import pytest

SAMPLES_ROOT = Path(__file__).resolve().parents[1] / "samples"


@pytest.fixture(scope="session")
def samples_root() -> Path:
    """The checked-in sample cases (samples/<case>/context.json + expected.json)."""
    return SAMPLES_ROOT


@pytest.fixture
def instance():
    """A throwaway in-memory Dagster instance (asset and sensor tests)."""
    from dagster import DagsterInstance

    with DagsterInstance.ephemeral() as inst:
        yield inst

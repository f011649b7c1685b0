from __future__ import annotations

import sys
from pathlib import Path

import pytest

# Fakes of back-ends and case builders, imported by name from any test folder.
sys.path.insert(0, str(Path(__file__).resolve().parent / "fakes"))

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


@pytest.fixture
def fake_http():
    """A local HTTP server answering recorded API shapes (see tests/fake_http.py)."""
    from fake_http import start_fake_http

    fake = start_fake_http()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()

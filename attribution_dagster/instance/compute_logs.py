"""Step output captured to the files the UI shows, without a live copy on the terminal.

Dagster's `LocalComputeLogManager` mirrors a run's stdout and stderr while it captures them:
per run it starts two `tail -F` processes and two Python watchers (orphan guards), and on
the way out waits for them to end. On a per-job run of the 2-node sample that is 30 ms of
its ~150 ms Dagster share, and on a busy case the two interpreters' start-up takes CPU from
the scanner. The local instance (`cli/local_run.write_instance_yaml`, `make ui`) logs to
the console at CRITICAL anyway: this manager writes the same files in the same place (the
UI's stdout / stderr tabs read them as before) and starts no process. A run launched from
the UI no longer echoes its steps' prints on the `dagster dev` terminal; they are in the UI.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from typing import Any

from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import (
    IO_TYPE_EXTENSION,
    LocalComputeLogManager,
)
from dagster._serdes import ConfigurableClassData
from dagster._utils import ensure_file, touch_file


class FileComputeLogManager(LocalComputeLogManager):
    """`LocalComputeLogManager` capturing to its files only (no mirror processes)."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> FileComputeLogManager:
        return cls(inst_data=inst_data, **config_value)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Generator[CapturedLogContext, None, None]:
        out = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = self.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        ensure_file(out)
        ensure_file(err)
        with redirect_to_file(sys.stdout, out), redirect_to_file(sys.stderr, err):
            yield CapturedLogContext(log_key)
        touch_file(self.complete_artifact_path(log_key))  # the UI knows the capture ended

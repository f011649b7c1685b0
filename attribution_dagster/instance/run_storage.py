"""Dagster's SQLite run storage on one kept connection.

The stock `SqliteRunStorage` opens and closes a connection (a new engine) for each
statement: some 17 per run, each close of the last connection checkpointing and deleting
the WAL of `runs.db` (instance/tuning.py). This one keeps an engine whose connection stays
open, tuned like the event log's (`synchronous=NORMAL`), and is otherwise the stock
storage: the same file, schema and migrations (`from_local`). Nothing watches `runs.db`
for changes (the webserver follows runs through the event log), so nothing waits for a
checkpoint; SQLite checkpoints it as the WAL grows and when the connection closes.

A local instance selects it in its `dagster.yaml` (`local_run.open_instance` writes that):

    run_storage:
      module: attribution_dagster.instance.run_storage
      class: KeptSqliteRunStorage
      config:
        base_dir: <instance dir>/history/
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dagster._core.storage.runs import SqliteRunStorage
from dagster._serdes import ConfigurableClassData
from sqlalchemy.engine import Connection

from attribution_dagster.instance.tuning import kept_engine


class KeptSqliteRunStorage(SqliteRunStorage):
    """`SqliteRunStorage` whose `connect` uses one kept, tuned engine."""

    def __init__(self, conn_string: str, inst_data: ConfigurableClassData | None = None):
        super().__init__(conn_string, inst_data)
        self._kept = kept_engine(conn_string)

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> KeptSqliteRunStorage:
        # the stock one builds a `SqliteRunStorage` whatever the class
        return cls.from_local(inst_data=inst_data, **config_value)

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._kept.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._kept.dispose()

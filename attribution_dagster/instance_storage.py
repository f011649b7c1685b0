"""A SQLite event log that stores a batch of materializations in one transaction.

A batched run of the per-job assets reports one materialization per job for each asset.
Dagster hands such a batch to `EventLogStorage.store_event_batch` when
`DAGSTER_EVENT_BATCH_SIZE` is set (`instance_tuning.py` sets it). dagster-postgres writes
the batch at once; the stock SQLite storage stores it event by event, and each event opens
and closes a fresh engine on two database files, re-inspects the schema and recompiles its
SQL: about 12 ms per event, 4 events per job. This storage writes the same rows (the run's
shard, then the cross-run index with the indexed tags and the asset's latest entry, as
`SqliteEventLogStorage.store_event` does) with one connection per shard per batch.

Any other batch (planned events, failures, a mix of runs) goes through the stock path.
A local instance selects it in its `dagster.yaml` (`local_run.open_instance` and
`make ui` write that):

    event_log_storage:
      module: attribution_dagster.instance_storage
      class: BatchedSqliteEventLogStorage
      config:
        base_dir: <instance dir>/history/runs/
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagster import DagsterEventType
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._serdes import ConfigurableClassData


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` plus a one-transaction `store_event_batch`."""

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: Any
    ) -> BatchedSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        if not _one_run_of_materializations(events):
            super().store_event_batch(events)
            return
        rows = [self._event_to_row(event) for event in events]
        with self.run_connection(events[0].run_id) as conn:
            conn.execute(SqlEventLogStorageTable.insert(), rows)
        with self.index_transaction() as conn:
            insert = SqlEventLogStorageTable.insert()
            event_ids = [conn.execute(insert, row).inserted_primary_key[0] for row in rows]
            self._store_asset_event_tags(conn, events, event_ids)
            latest = {}
            for event, event_id in zip(events, event_ids, strict=True):
                latest[event.get_dagster_event().asset_key] = (event, event_id)
            for event, event_id in latest.values():
                self._store_asset_event(conn, event, event_id)


def _one_run_of_materializations(events: Sequence[EventLogEntry]) -> bool:
    if len(events) < 2 or len({event.run_id for event in events}) != 1:
        return False
    return all(
        event.is_dagster_event
        and event.get_dagster_event().event_type == DagsterEventType.ASSET_MATERIALIZATION
        and event.get_dagster_event().asset_key is not None
        for event in events
    )

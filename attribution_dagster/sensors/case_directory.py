"""Watch a directory of job cases and register each new one as a `jobs` partition.

Cursor: a high-water mark over the change time of each case's `context.json`
(max of mtime and ctime, so copies that preserve mtime, like `rsync -a`, still count as
new) with the names seen at exactly that instant as a tie-break. A tick stats the case
directories (cheap), reads at most `max_cases_per_tick` context files newer than the
mark, in (time, name) order, and moves the mark past what it handled, so a big backlog
drains over several ticks and nothing is skipped.

Idempotence: a partition key already registered is never added or requested again, and
every `RunRequest` carries `run_key=<partition key>`, which Dagster deduplicates; a lost
cursor therefore only costs a re-scan. A case whose context.json is malformed is logged
and skipped (the tick goes on); if the file is fixed later its change time moves and it
is picked up. A context.json changed less than `settle_seconds` ago waits for the next
tick, so a case that is still being copied is not read half-written (write
context.json last, or atomically, to be safe).
"""

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dagster import (
    JobDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from attribution_dagster.resources import AssetStoreResource, StaticCasesResource
from attribution_dagster.sensors.requests import default_status, register_and_run, registered

CASE_DIR_TAG = "attribution/case_dir"


@dataclass(frozen=True)
class Cursor:
    mark_ns: int = 0
    names_at_mark: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: str | None) -> "Cursor":
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
            return cls(int(data.get("mark_ns", 0)), tuple(data.get("names_at_mark", ())))
        except (ValueError, TypeError, AttributeError):
            return cls()  # an unreadable cursor means a full re-scan, which is safe

    def dump(self) -> str:
        return json.dumps({"mark_ns": self.mark_ns, "names_at_mark": sorted(self.names_at_mark)})

    def is_new(self, changed_ns: int, name: str) -> bool:
        return changed_ns > self.mark_ns or (
            changed_ns == self.mark_ns and name not in self.names_at_mark
        )

    def advance(self, changed_ns: int, name: str) -> "Cursor":
        if changed_ns > self.mark_ns:
            return Cursor(changed_ns, (name,))
        return Cursor(self.mark_ns, (*self.names_at_mark, name))


def _changed_ns(path: Path) -> int | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return max(st.st_mtime_ns, st.st_ctime_ns)


def scan_case_root(root: Path) -> list[tuple[int, str, Path]]:
    """(change time, relative name, dir) of every case under root, oldest change first.

    A case is a directory holding a context.json (root itself included, as for the CLI);
    the walk does not descend into a case (its logs can be thousands of files) nor into
    hidden directories.
    """
    out = []
    stack = [root]
    while stack:
        current = stack.pop()
        changed = _changed_ns(current / "context.json")
        if changed is not None:
            name = current.relative_to(root).as_posix()
            out.append((changed, name, current))
            continue
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
            except OSError:
                continue
    out.sort(key=lambda t: (t[0], t[1]))
    return out


def build_case_directory_sensor(
    job: JobDefinition | UnresolvedAssetJobDefinition,
    *,
    interval_seconds: int = 30,
    max_cases_per_tick: int = 200,
    settle_seconds: float = 5.0,
    enabled: bool = True,
) -> SensorDefinition:
    @sensor(
        name="case_directory_sensor",
        job=job,
        minimum_interval_seconds=interval_seconds,
        default_status=default_status(enabled),
        description="Registers each new case under the case directory as a `jobs` partition "
        "and requests one in-process run for it.",
    )
    def case_directory_sensor(
        context: SensorEvaluationContext,
        cases: StaticCasesResource,
        store: AssetStoreResource,
    ) -> SensorResult | SkipReason:
        root = cases.root
        if not root.is_dir():
            return SkipReason(f"case directory {root} does not exist")
        cursor = Cursor.parse(context.cursor)
        now_ns = time.time_ns()
        settle_ns = int(settle_seconds * 1e9)
        new_keys: dict[str, str] = {}
        skipped = 0
        handled = 0
        why: list[str] = []  # each case passed over, and why: the tick's skip reason says it
        for changed, name, case_dir in scan_case_root(root):
            if not cursor.is_new(changed, name):
                continue
            if now_ns - changed < settle_ns or handled >= max_cases_per_tick:
                break  # the mark stays before this case; a later tick takes it
            handled += 1
            cursor = cursor.advance(changed, name)
            try:
                ctx = cases.load(case_dir)
            except Exception as exc:  # noqa: BLE001 - a bad case must not stop the tick
                skipped += 1
                first = (str(exc).strip().splitlines() or [""])[0]
                why.append(f"{case_dir}: {type(exc).__name__}: {first}")
                context.log.warning(f"skipping case {why[-1]}")
                continue
            key = ctx.partition_key
            if key in new_keys:
                why.append(f"{case_dir}: partition key {key} is already used by "
                           f"{new_keys[key]}")
                context.log.warning(f"skipping case {why[-1]}")
                continue
            new_keys[key] = str(case_dir)
        # ask about these keys only: listing every partition grows with the retention
        for key in registered(context.instance, new_keys):
            del new_keys[key]
        if new_keys:
            store.client().index_cases(new_keys)
        if not new_keys:
            if handled:
                # Nothing new, but the cursor moved past what we read (e.g. malformed cases).
                return SensorResult(
                    cursor=cursor.dump(),
                    skip_reason=SkipReason(
                        f"no new jobs ({handled} case(s) read, {skipped} malformed)"
                        + (f"; skipped {why[0]}" if why else "")
                        + (f" (+{len(why) - 1} more)" if len(why) > 1 else "")
                    ),
                )
            return SkipReason(f"no new cases under {root}")
        return register_and_run({k: {CASE_DIR_TAG: d} for k, d in new_keys.items()}, cursor.dump())

    return case_directory_sensor

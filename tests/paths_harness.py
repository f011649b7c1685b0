"""Run the same job cases through every path of the project and compare the full results.

The paths (issue 15, item 1):

    analyze         `attribution analyze CASE --json` (the reference)
    run_direct      `attribution run ROOT --direct`
    run_dagster     `attribution run ROOT --instance DAGSTER_HOME` (per-job assets, in process)
    run_oop         `dagster job execute -m attribution_dagster.definitions -a defs -j
                    attribute_job` in a separate process: the code location workspace.yaml
                    loads, over partition ranges (the backfill policy's batches)
    sensor          the loaded code location's `case_directory_sensor` ticks on the instance;
                    each RunRequest it makes runs as its own single-partition run
    scheduler_sensor  the same with each cluster's `<cluster>_finished_jobs_sensor` (the
                    static scheduler's contexts, indexed by the sensor)
    window          the loaded code location's window-partition assets (finished_jobs ->
                    window_attributions), one run per cluster over its days
    backfill_direct `attribution backfill CLUSTER --direct`
    backfill_dagster`attribution backfill CLUSTER` (window assets through Dagster)
    export          `attribution export CLUSTER/JOB_ID DIR`, then `attribution analyze DIR`

Scheduler-backed paths (window, backfill, export) need clusters with a scheduler: the harness
lays the cases out as `<tmp>/clusters/<cluster>/<case>` (hard links where possible) and
writes an attribution.yaml in which each cluster of the cases uses the static scheduler over
its directory. The same file configures the code location (`ATTRIBUTION_CONFIG`), whose
case root is `<tmp>/clusters`. Every Dagster path runs on one real instance in a temporary
DAGSTER_HOME; each path writes its own results database, read back through `SqlSink`.

Results compare as JSON with only volatile fields dropped (`VOLATILE`); `diff` names the
case, the field path and both values.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from attribution_dagster.connectors.static.client import StaticContextClient
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.result import AttributionResult

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
HELDOUT = REPO / "tests" / "heldout"  # tests/heldout/real-threads/* are found too (nested)

def code_location(target: Any) -> Any:
    """The Definitions Dagster loads from the workspace's attribute: a `@definitions`
    function is called (as Dagster's loader does), a Definitions object taken as is."""
    from dagster import Definitions

    return target if isinstance(target, Definitions) else target()


def workspace_entry() -> tuple[str, str]:
    """(module, attribute) of the code location, as workspace.yaml names them."""
    ws = yaml.safe_load((REPO / "workspace.yaml").read_text(encoding="utf-8"))
    entry = ws["load_from"][0]["python_module"]
    return entry["module_name"], entry["attribute"]


VOLATILE = frozenset({"analyzed_at"})
"""Top-level result fields that may differ between two analyses of the same evidence."""

PATHS = (
    "run_direct",
    "run_dagster",
    "run_oop",
    "sensor",
    "scheduler_sensor",
    "window",
    "backfill_direct",
    "backfill_dagster",
    "export",
)


@dataclass(frozen=True)
class Case:
    name: str  # path relative to the repository: samples/xid79-..., tests/heldout/h01-...
    path: Path
    ctx: ExecutionContext

    @property
    def key(self) -> str:
        return self.ctx.partition_key

    @property
    def cluster(self) -> str:
        return self.ctx.cluster or "default"

    @property
    def flat(self) -> str:
        """A directory name unique over all cases."""
        return self.name.replace("/", "__")


def discover(roots: Iterable[Path] = (SAMPLES, HELDOUT)) -> list[Case]:
    """Every case (a directory with context.json) under the roots, by name."""
    client = StaticContextClient()
    cases = []
    for root in roots:
        if not root.is_dir():
            continue
        for d in client.list_cases(root):
            name = d.relative_to(REPO).as_posix() if d.is_relative_to(REPO) else d.name
            cases.append(Case(name, d, client.load(d)))
    keys: dict[str, str] = {}
    for c in cases:
        if c.key in keys:
            raise ValueError(f"{c.name} and {keys[c.key]} share the partition key {c.key}")
        keys[c.key] = c.name
    return sorted(cases, key=lambda c: c.name)


# -- comparing ------------------------------------------------------------------------------


def comparable(result: AttributionResult | dict[str, Any]) -> dict[str, Any]:
    """The result as JSON, without the volatile fields."""
    data = result.model_dump(mode="json") if isinstance(result, AttributionResult) else result
    data = {k: v for k, v in data.items() if k not in VOLATILE}
    # A context that names no cluster is filed under `default` (job_partition_key); a path
    # that asks the harness's `default` cluster's static scheduler gets that name stamped.
    if "cluster" in data and data["cluster"] is None:
        data["cluster"] = "default"
    for ev in [link["evidence"] for link in data.get("symptom_chain", [])] + data.get(
        "evidence", []
    ):
        ref = ev.get("ref") or {}
        if ref.get("type") == "file" and ref.get("root"):
            ev["ref"] = {**ref, "root": case_identity(ref["root"])}
    return data


def case_identity(root: str) -> str:
    """Which case a file locator's root names, wherever the case was read from: a path
    reads the original (`samples/x`) or the harness's copy (`clusters/<c>/samples__x`)."""
    return Path(root).name.rsplit("__", 1)[-1]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {f"{prefix}.length": len(value)} if value else {prefix: []}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def diff(reference: dict[str, Any], got: dict[str, Any], limit: int = 8) -> list[str]:
    """Lines `field: reference -> got` for the fields that differ (the first `limit`)."""
    a, b = _flatten(reference), _flatten(got)
    lines = []
    for k in sorted(set(a) | set(b), key=_field_order):
        if a.get(k, "<absent>") != b.get(k, "<absent>"):
            lines.append(f"{k}: {_short(a.get(k, '<absent>'))} -> {_short(b.get(k, '<absent>'))}")
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more fields"]
    return lines


def _field_order(k: str) -> tuple[int, str]:
    first = ("status", "category", "suspect_nodes", "candidates", "confidence", "symptom_chain")
    head = k.split(".", 1)[0].split("[", 1)[0]
    return (first.index(head) if head in first else len(first), k)


def _short(v: Any, n: int = 90) -> str:
    s = json.dumps(v, ensure_ascii=False)
    return s if len(s) <= n else s[: n - 1] + "…"


def as_exported(result: dict[str, Any]) -> dict[str, Any]:
    """What an export can reproduce: the result without the coverage counts of lines read
    and not kept, nor the note counting damaged lines (export.NOT_REPRODUCED, DAMAGE_NOTE):
    an export keeps every line the analysis kept, not every byte it read."""
    from attribution_dagster.reports.export import DAMAGE_NOTE, NOT_REPRODUCED

    r = dict(result)
    r["coverage"] = [
        {k: v for k, v in c.items() if k not in NOT_REPRODUCED} for c in r["coverage"]
    ]
    r["notes"] = [n for n in r.get("notes", []) if not DAMAGE_NOTE.match(n)]
    return r


def compare(
    reference: dict[str, dict[str, Any]],
    got: dict[str, dict[str, Any] | None],
    normalize: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, list[str]]:
    """case -> differences, for every case of `got` that disagrees with the reference (a
    case the path gave no result for is one difference saying so). `normalize`, when given,
    is applied to both sides first (the export path: `as_exported`)."""
    out: dict[str, list[str]] = {}
    for name, result in got.items():
        if result is None:
            out[name] = ["no result from this path"]
            continue
        want = reference[name]
        if normalize is not None:
            want, result = normalize(want), normalize(result)
        d = diff(want, result)
        if d:
            out[name] = d
    return out


def report(path: str, differences: dict[str, list[str]], total: int, cases: int = 10) -> str:
    """A readable account of a path's disagreements (the test's failure message)."""
    lines = [f"{path}: {total - len(differences)}/{total} cases agree with `analyze`"]
    for name in sorted(differences)[:cases]:
        lines.append(f"  {name}:")
        lines.extend(f"    {d}" for d in differences[name])
    if len(differences) > cases:
        lines.append(f"  ... and {len(differences) - cases} more cases")
    return "\n".join(lines)


# -- the environment ------------------------------------------------------------------------


def _link_tree(src: Path, dst: Path) -> None:
    def link(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dst, copy_function=link)


@dataclass
class Env:
    """A temporary home for one comparison: case tree, configuration, DAGSTER_HOME."""

    tmp: Path
    cases: list[Case]
    # more configuration per cluster (e.g. a `logs` back-end), merged into attribution.yaml
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    clusters_dir: Path = field(init=False)
    config_path: Path = field(init=False)
    dagster_home: Path = field(init=False)
    by_flat: dict[str, Case] = field(init=False)

    def __post_init__(self) -> None:
        self.clusters_dir = self.tmp / "clusters"
        self.config_path = self.tmp / "attribution.yaml"
        self.dagster_home = self.tmp / "dagster_home"
        self.by_flat = {c.flat: c for c in self.cases}
        for c in self.cases:
            _link_tree(c.path, self.clusters_dir / c.cluster / c.flat)
        self.dagster_home.mkdir(parents=True)
        from attribution_dagster.cli.local_run import write_instance_yaml

        write_instance_yaml(self.dagster_home)
        first = min(c.ctx.end for c in self.cases).astimezone(timezone.utc).date()
        config = {
            "case_root": str(self.clusters_dir),
            "sink": {"url": self.db("defs")},
            "sensor": {
                "enabled": False,
                "settle_seconds": 0,
                "max_cases_per_tick": 10_000,
                "retention_days": None,
            },
            "analysis": {"workers": 1},
            "retry": {"max_retries": 0, "delay_seconds": 0},
            "fleet": {
                "window": "daily",
                "start": (first - timedelta(days=1)).isoformat(),
                "workers": 1,
                "report_schedule": False,
            },
            "clusters": {
                name: {"scheduler": {"kind": "static", "path": str(self.clusters_dir / name)},
                       "sensor": True, **self.extra.get(name, {})}
                for name in sorted({c.cluster for c in self.cases})
            },
        }
        self.config_path.write_text(yaml.safe_dump(config), encoding="utf-8")

    def db(self, name: str) -> str:
        return f"sqlite:///{self.tmp / (name + '.db')}"

    @contextlib.contextmanager
    def environ(self) -> Iterator[None]:
        """DAGSTER_HOME, ATTRIBUTION_CONFIG and nothing else of ours from the outside."""
        saved = dict(os.environ)
        for k in [k for k in os.environ if k.startswith("ATTRIBUTION_")]:
            del os.environ[k]
        os.environ["DAGSTER_HOME"] = str(self.dagster_home)
        os.environ["ATTRIBUTION_CONFIG"] = str(self.config_path)
        try:
            yield
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def case_of(self, ctx_or_result: Any) -> Case | None:
        key = (ctx_or_result.cluster or "default", ctx_or_result.job_id)
        for c in self.cases:
            if (c.cluster, c.ctx.job_id) == key:
                return c
        return None

    def results(self, url: str) -> dict[str, dict[str, Any]]:
        """Case name -> the result stored for it in the database at `url`."""
        from attribution_dagster.sinks.sql import SqlSink

        by_key = {(c.cluster, c.ctx.job_id): c.name for c in self.cases}
        out: dict[str, dict[str, Any]] = {}
        for r in SqlSink(url).read():  # newest first
            name = by_key.get((r.cluster or "default", r.job_id))
            if name is not None and name not in out:
                out[name] = comparable(r)
        return out


def _cli(*argv: str) -> tuple[int, str, str]:
    from attribution_dagster.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _wanted(env: Env, cases: list[Case], got: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {c.name: got.get(c.name) for c in cases}


# -- the paths ------------------------------------------------------------------------------


def path_analyze(env: Env, cases: list[Case]) -> dict[str, dict[str, Any]]:
    out = {}
    with env.environ():  # the same configuration as every other path
        for c in cases:
            code, stdout, stderr = _cli("analyze", str(c.path), "--json")
            assert code == 0, f"analyze {c.name}: exit {code}: {stderr[-500:]}"
            out[c.name] = comparable(json.loads(stdout))
    return out


def _roots(cases: list[Case]) -> list[Path]:
    """The directories `run` is pointed at: samples/, tests/heldout/, or the cases' own
    parents (cases a test wrote elsewhere)."""
    roots = set()
    for c in cases:
        if c.path.is_relative_to(SAMPLES):
            roots.add(SAMPLES)
        elif c.path.is_relative_to(HELDOUT):
            roots.add(HELDOUT)
        else:
            roots.add(c.path.parent)
    return sorted(roots)


def path_run_direct(env: Env, cases: list[Case]) -> dict[str, Any]:
    url = env.db("run_direct")
    with env.environ():
        for root in _roots(cases):
            code, _, stderr = _cli("run", str(root), "--direct", "--db", url)
            assert code == 0, f"run --direct {root}: exit {code}: {stderr[-500:]}"
    return _wanted(env, cases, env.results(url))


def path_run_dagster(env: Env, cases: list[Case]) -> dict[str, Any]:
    url = env.db("run_dagster")
    with env.environ():
        for root in _roots(cases):
            code, _, stderr = _cli("run", str(root), "--db", url,
                                   "--instance", str(env.dagster_home))
            assert code == 0, f"run {root}: exit {code}: {stderr[-500:]}"
    return _wanted(env, cases, env.results(url))


def _clear_results(url: str) -> None:
    from attribution_dagster.sinks.sql import SqlSink, metadata

    sink = SqlSink(url)
    with sink.engine.begin() as conn:
        for t in reversed(metadata.sorted_tables):
            conn.execute(t.delete())


@contextlib.contextmanager
def loaded_defs(env: Env) -> Iterator[Any]:
    """`attribution_dagster.definitions:defs` as workspace.yaml loads it, under env's config."""
    name, attribute = workspace_entry()
    module = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with env.environ():
                module = importlib.reload(module)
                yield code_location(getattr(module, attribute))
        finally:
            importlib.reload(module)  # the module as the rest of the session knew it


def _instance(env: Env) -> Any:
    from dagster import DagsterInstance

    return DagsterInstance.from_config(str(env.dagster_home))


def path_run_oop(env: Env, cases: list[Case], per_run: int = 100) -> dict[str, Any]:
    """Partitions registered, then `dagster job execute` over key ranges in a subprocess."""
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    from attribution_dagster.assets.per_job import JOBS_PARTITIONS
    from attribution_dagster.cli.local_run import _contiguous_chunks

    url = env.db("defs")
    _clear_results(url)
    with env.environ():
        inst = _instance(env)
        try:
            known = set(inst.get_dynamic_partitions(JOBS_PARTITIONS.name))
            new = [c.key for c in cases if c.key not in known]
            if new:
                inst.add_dynamic_partitions(JOBS_PARTITIONS.name, new)
            order = inst.get_dynamic_partitions(JOBS_PARTITIONS.name)
        finally:
            inst.dispose()
        chunks = _contiguous_chunks(order, {c.key for c in cases}, per_run)
        for chunk in chunks:
            tags = {
                ASSET_PARTITION_RANGE_START_TAG: chunk[0],
                ASSET_PARTITION_RANGE_END_TAG: chunk[-1],
            }
            if len(chunk) == 1:
                tags = {"dagster/partition": chunk[0]}
            module, attribute = workspace_entry()
            proc = subprocess.run(
                [str(Path(sys.executable).parent / "dagster"), "job", "execute",
                 "-m", module, "-a", attribute, "-d", str(REPO),
                 "-j", "attribute_job", "--tags", json.dumps(tags)],
                cwd=REPO, env=dict(os.environ), capture_output=True, text=True, timeout=600,
            )
            if proc.returncode != 0:  # a batch isolates its failed jobs: they have no result
                why = [ln for ln in proc.stderr.splitlines() if "Failure:" in ln]
                print(f"run_oop: dagster job execute failed: {why[-1:]}"[:600], file=sys.stderr)
    return _wanted(env, cases, env.results(url))


def path_sensor(env: Env, cases: list[Case]) -> dict[str, Any]:
    """One tick of the loaded case-directory sensor over the case tree; each of its run
    requests for `cases` runs alone (one partition, the sensor's tags), as the daemon would."""
    from dagster import build_sensor_context

    from attribution_dagster.assets.per_job import JOBS_PARTITIONS

    url = env.db("defs")
    _clear_results(url)
    wanted = {c.key for c in cases}
    with loaded_defs(env) as defs:
        inst = _instance(env)
        try:
            # the sensor registers only keys Dagster does not know yet: forget the cases'
            for key in inst.get_existing_dynamic_partitions(JOBS_PARTITIONS.name, sorted(wanted)):
                inst.delete_dynamic_partition(JOBS_PARTITIONS.name, key)
            sensor = defs.get_sensor_def("case_directory_sensor")
            job = defs.resolve_job_def("attribute_job")
            with build_sensor_context(instance=inst, resources=defs.resources) as ctx:
                result = sensor(ctx)
            for req in result.dynamic_partitions_requests:
                inst.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
            requests = [r for r in result.run_requests if r.partition_key in wanted]
            assert len(requests) == len(cases), (
                f"the sensor requested {len(requests)} of the {len(cases)} cases' runs"
            )
            from attribution_dagster.cli.local_run import QUIET_RUN_CONFIG

            for r in requests:
                job.execute_in_process(
                    instance=inst, partition_key=r.partition_key, tags=r.tags,
                    run_config=QUIET_RUN_CONFIG, raise_on_error=False,
                )
        finally:
            inst.dispose()
    return _wanted(env, cases, env.results(url))


def path_scheduler_sensor(env: Env, cases: list[Case]) -> dict[str, Any]:
    """One tick of each cluster's `<cluster>_finished_jobs_sensor` of the loaded code location
    (the static scheduler lists the cluster's cases); each run request it made for `cases`
    runs alone, with the context the sensor indexed."""
    from dagster import build_sensor_context

    from attribution_dagster.assets.per_job import JOBS_PARTITIONS
    from attribution_dagster.cli.local_run import QUIET_RUN_CONFIG
    from attribution_dagster.sensors import SchedulerCursor, sensor_name

    url = env.db("defs")
    _clear_results(url)
    wanted = {c.key for c in cases}
    with loaded_defs(env) as defs:
        inst = _instance(env)
        try:
            for key in inst.get_existing_dynamic_partitions(JOBS_PARTITIONS.name, sorted(wanted)):
                inst.delete_dynamic_partition(JOBS_PARTITIONS.name, key)
            job = defs.resolve_job_def("attribute_job")
            requests = []
            for cluster in sorted({c.cluster for c in cases}):
                first = min(c.ctx.end for c in cases if c.cluster == cluster)
                cursor = SchedulerCursor(watermark=first).dump()
                sensor = defs.get_sensor_def(sensor_name(cluster))
                with build_sensor_context(
                    instance=inst, resources=defs.resources, cursor=cursor
                ) as ctx:
                    result = sensor(ctx)
                for req in result.dynamic_partitions_requests:
                    inst.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
                requests += [r for r in result.run_requests if r.partition_key in wanted]
            assert len(requests) == len(cases), (
                f"the sensors requested {len(requests)} of the {len(cases)} cases' runs"
            )
            for r in requests:
                job.execute_in_process(
                    instance=inst, partition_key=r.partition_key, tags=r.tags,
                    run_config=QUIET_RUN_CONFIG, raise_on_error=False,
                )
        finally:
            inst.dispose()
    return _wanted(env, cases, env.results(url))


def _cluster_days(cases: list[Case]) -> dict[str, list[date]]:
    days: dict[str, set[date]] = defaultdict(set)
    for c in cases:
        days[c.cluster].add(c.ctx.end.astimezone(timezone.utc).date())
    return {k: sorted(v) for k, v in sorted(days.items())}


def _spans(days: list[date], gap: int = 7) -> list[tuple[date, date]]:
    """Runs of days no more than `gap` apart: [first, last] each."""
    spans: list[tuple[date, date]] = []
    for d in days:
        if spans and (d - spans[-1][1]).days <= gap:
            spans[-1] = (spans[-1][0], d)
        else:
            spans.append((d, d))
    return spans


def path_window(env: Env, cases: list[Case]) -> dict[str, Any]:
    """The loaded code location's window assets, one run per cluster and span of days."""
    from dagster import materialize
    from dagster._core.storage.tags import (
        ASSET_PARTITION_RANGE_END_TAG,
        ASSET_PARTITION_RANGE_START_TAG,
    )

    from attribution_dagster.assets.per_window import WINDOW_ASSET_NAMES
    from attribution_dagster.cli.local_run import QUIET_RUN_CONFIG

    url = env.db("defs")
    _clear_results(url)
    with loaded_defs(env) as defs:
        assets = [a for a in defs.assets if a.key.to_user_string() in WINDOW_ASSET_NAMES]
        inst = _instance(env)
        try:
            for cluster, days in _cluster_days(cases).items():
                for first, last in _spans(days):
                    start, end = f"{cluster}|{first}", f"{cluster}|{last}"
                    res = materialize(
                        assets, instance=inst, resources=defs.resources,
                        tags={ASSET_PARTITION_RANGE_START_TAG: start,
                              ASSET_PARTITION_RANGE_END_TAG: end},
                        run_config=QUIET_RUN_CONFIG, raise_on_error=False,
                    )
                    if not res.success:
                        msgs = [e.message for e in res.all_events if e.is_failure][:2]
                        raise AssertionError(f"window run {start}..{end} failed: {msgs}")
        finally:
            inst.dispose()
    return _wanted(env, cases, env.results(url))


def _backfill(env: Env, cases: list[Case], name: str, extra: list[str]) -> dict[str, Any]:
    url = env.db(name)
    with env.environ():
        for cluster, days in _cluster_days(cases).items():
            for first, last in _spans(days):
                code, _, stderr = _cli(
                    "backfill", cluster, "--since", first.isoformat(),
                    "--until", (last + timedelta(days=1)).isoformat(),
                    "--config", str(env.config_path), "--db", url, *extra,
                )
                if code != 0:  # the cluster's cases get no result: reported per case
                    print(f"{name} {cluster} {first}..{last}: exit {code}: {stderr[-300:]}",
                          file=sys.stderr)
    return _wanted(env, cases, env.results(url))


def path_backfill_direct(env: Env, cases: list[Case]) -> dict[str, Any]:
    return _backfill(env, cases, "backfill_direct", ["--direct"])


def path_backfill_dagster(env: Env, cases: list[Case]) -> dict[str, Any]:
    return _backfill(env, cases, "backfill_dagster", ["--instance", str(env.dagster_home)])


def path_export(env: Env, cases: list[Case]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with env.environ():
        for c in cases:
            target = env.tmp / "exported" / c.flat
            code, _, stderr = _cli(
                "--config", str(env.config_path), "export", f"{c.cluster}/{c.ctx.job_id}",
                str(target),
            )
            assert code == 0, f"export {c.name}: exit {code}: {stderr[-500:]}"
            code, stdout, stderr = _cli("analyze", str(target), "--json")
            assert code == 0, f"analyze of the export of {c.name}: {stderr[-500:]}"
            out[c.name] = comparable(json.loads(stdout))
    return out


NORMALIZE = {"export": as_exported}
"""Per path, what both sides are reduced to before comparing (documented limits)."""

RUNNERS = {
    "run_direct": path_run_direct,
    "run_dagster": path_run_dagster,
    "run_oop": path_run_oop,
    "sensor": path_sensor,
    "scheduler_sensor": path_scheduler_sensor,
    "window": path_window,
    "backfill_direct": path_backfill_direct,
    "backfill_dagster": path_backfill_dagster,
    "export": path_export,
}


def main(argv: list[str] | None = None) -> int:
    """`python tests/paths_harness.py [PATH ...]`: agreement counts per path over every case
    (all paths by default; the sensor paths take a few minutes)."""
    import tempfile
    import time

    names = (argv if argv is not None else sys.argv[1:]) or list(PATHS)
    cases = discover()
    with tempfile.TemporaryDirectory(prefix="paths-") as tmp:
        env = Env(Path(tmp), cases)
        t0 = time.perf_counter()
        ref = path_analyze(env, cases)
        print(f"analyze: {len(ref)} cases, {time.perf_counter() - t0:.1f} s", flush=True)
        for name in names:
            t0 = time.perf_counter()
            try:
                got = RUNNERS[name](env, cases)
            except AssertionError as e:
                print(f"{name}: FAILED: {str(e)[:1500]}", flush=True)
                continue
            diffs = compare(ref, got, NORMALIZE.get(name))
            s = sum(1 for c in cases if c.name.startswith("samples/") and c.name not in diffs)
            h = sum(1 for c in cases if not c.name.startswith("samples/") and c.name not in diffs)
            ns = sum(1 for c in cases if c.name.startswith("samples/"))
            print(f"{name}: samples {s}/{ns}, held-out {h}/{len(cases) - ns}, "
                  f"{time.perf_counter() - t0:.1f} s", flush=True)
            print(report(name, diffs, len(cases), cases=40), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

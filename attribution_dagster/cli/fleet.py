"""`attribution backfill` and `attribution report`: the fleet path from the command line.

    attribution backfill atlas --since 2026-10-01 --until 2026-11-12
    attribution report --week 2026-W46 [--cluster atlas] [--out DIR]

A backfill materializes the window assets through Dagster (a persistent instance, so the
runs show in the UI) window by window, with a progress bar and an ETA on stderr. It is
resumable: windows recorded as done under the current rules version are skipped, and
inside a window jobs that already have a result are skipped, so a killed backfill run
again finishes without redoing or duplicating jobs.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

EXIT_OK = 0
EXIT_WINDOWS_FAILED = 1
EXIT_INPUT = 2


def add_fleet_parsers(sub: Any) -> None:
    """The `backfill` and `report` subcommands (cli.build_parser calls this)."""
    from attribution_dagster.cli.args import add_config_arg, positive_int

    b = sub.add_parser(
        "backfill",
        help="attribute a cluster's finished jobs window by window over a date range",
        description="Attribute every job of CLUSTER that ended in [--since, --until), one "
        "window partition (day or hour, `fleet.window`) at a time, through Dagster. "
        "Resumable: done windows and jobs are skipped.",
    )
    b.add_argument("cluster", help="a cluster of the configuration (clusters: in the YAML)")
    b.add_argument("--since", required=True, metavar="DATE", help="first day (YYYY-MM-DD, UTC)")
    b.add_argument("--until", required=True, metavar="DATE", help="end, exclusive (YYYY-MM-DD)")
    add_config_arg(b)
    b.add_argument("--db", metavar="URL", help="results database (default: the config's sink)")
    b.add_argument("--instance", type=Path, metavar="DIR", default=None,
                   help="Dagster instance directory (default: $DAGSTER_HOME, else .dagster)")
    b.add_argument("--direct", action="store_true",
                   help="call the window functions directly, without Dagster")
    b.add_argument("--workers", type=positive_int, metavar="N", help="processes per window")
    b.add_argument("--redo", action="store_true",
                   help="attribute every job again, even those already done")

    r = sub.add_parser(
        "report",
        help="write the weekly failure report (HTML, Markdown, PNG charts)",
        description="The weekly report of one ISO week from the result tables: jobs by "
        "status and category, GPU-hours lost, ambiguous/unattributed rates and why, repeat "
        "offenders (nodes, GPUs, ports; switches, switch ports and NVLink domains over the "
        "last weeks), failed jobs and their verdicts, change against the previous week.",
    )
    r.add_argument("--week", required=True, help="ISO week, e.g. 2026-W46 (or a date in it)")
    r.add_argument("--cluster", help="one cluster (default: the whole fleet)")
    r.add_argument("--out", type=Path, metavar="DIR",
                   help="output directory (default: <fleet.reports_dir>/<scope>/<week>)")
    r.add_argument("--json", action="store_true",
                   help="print the report's tables as one JSON object on stdout (files are "
                   "written only with --out)")
    add_config_arg(r)
    r.add_argument("--db", metavar="URL", help="results database (default: the config's sink)")


def _fail(msg: str, code: int = EXIT_INPUT) -> int:
    from attribution_dagster.core.secrets import redact  # an echoed credential, masked

    print(f"attribution: error: {redact(msg)}", file=sys.stderr)
    return code


def _db_url(db: str | None, config: Any) -> str:
    if not db:
        return str(config.resolved_sink_url())
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).resolve()}"


def _day(text: str, flag: str) -> datetime:
    try:
        d = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{flag} {text!r}: expected a date like 2026-10-01") from None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


def _fmt_secs(s: float) -> str:
    s = max(0, int(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class Progress:
    """One status line on stderr: a bar over windows, jobs done, rate and ETA."""

    def __init__(self, label: str, windows: int, out: TextIO | None = None) -> None:
        self.label, self.windows, self.out = label, windows, out or sys.stderr
        self.done_windows = 0
        self.jobs = 0
        self.t0 = time.monotonic()
        self.current = ""
        self.tty = self.out.isatty()
        self._last = 0.0

    def window_started(self, key: str) -> None:
        self.current = key
        self.show()

    def jobs_done(self, n: int) -> None:
        self.jobs += n
        if time.monotonic() - self._last > 0.5:
            self.show()

    def window_finished(self, line: str) -> None:
        self.done_windows += 1
        if not self.tty:
            print(f"{self.label}: {line}", file=self.out)
        self.show(force=True)

    def show(self, force: bool = False) -> None:
        self._last = time.monotonic()
        if not self.tty and not force:
            return
        elapsed = time.monotonic() - self.t0
        frac = self.done_windows / self.windows if self.windows else 1.0
        width = 24
        bar = "#" * int(width * frac) + "-" * (width - int(width * frac))
        eta = elapsed / frac * (1 - frac) if frac > 0 else 0.0
        rate = self.jobs / elapsed if elapsed > 0 else 0.0
        text = (f"{self.label}: [{bar}] {self.done_windows}/{self.windows} windows, "
                f"{self.jobs:,} jobs, {rate:.0f} jobs/s, elapsed {_fmt_secs(elapsed)}"
                + (f", ETA {_fmt_secs(eta)}" if 0 < frac < 1 else "")
                + (f" ({self.current})" if self.current and frac < 1 else ""))
        if self.tty:
            self.out.write("\r\033[K" + text)
            self.out.flush()
        else:
            print(text, file=self.out)

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")


def cmd_backfill(args: argparse.Namespace) -> int:
    from attribution_dagster import fleet, pipeline
    from attribution_dagster.connectors.clusters import Cluster, load_checked_config
    from attribution_dagster.core.config import ConfigError
    from attribution_dagster.sinks.sql import SqlSink

    try:
        config = load_checked_config(args.config)
        since, until = _day(args.since, "--since"), _day(args.until, "--until")
    except (ConfigError, ValueError) as e:
        return _fail(str(e))
    if args.cluster not in config.clusters:
        known = ", ".join(sorted(config.clusters)) or "none"
        return _fail(f"cluster {args.cluster!r} is not configured (configured: {known})")
    if until <= since:
        return _fail("--until must be after --since")
    f = config.fleet
    if args.workers:
        f = f.model_copy(update={"workers": args.workers})
        config = config.model_copy(update={"fleet": f})
    url = _db_url(args.db, config)
    sink = SqlSink(url)
    rules = pipeline.engine().rules_version
    keys = fleet.window_keys(f.window, since, until)
    status = fleet.window_status(sink, args.cluster)
    todo = [
        k for k in keys
        if args.redo or not (status.get(k, {}).get("status") == "done"
                             and status[k].get("rules_version") == rules)
    ]
    print(f"backfill {args.cluster}: {len(keys)} {f.window} windows from {since:%Y-%m-%d} to "
          f"{until:%Y-%m-%d}, {len(keys) - len(todo)} already done, {len(todo)} to run "
          f"({'directly' if args.direct else 'through Dagster'}); results: "
          f"{_safe(url)}", file=sys.stderr)
    progress = Progress(f"backfill {args.cluster}", len(todo))
    failed: dict[str, str] = {}
    cluster = Cluster(args.cluster, config.clusters[args.cluster])
    runner = _direct_runner(sink, cluster, config, args) if args.direct else _dagster_runner(
        config, url, args
    )
    fleet.PROGRESS_HOOK = progress.jobs_done
    try:
        for key in todo:
            progress.window_started(key)
            error = runner(key)
            row = fleet.window_status(sink, args.cluster).get(key, {})
            if error:
                failed[key] = error
                progress.window_finished(f"{key} FAILED: {error}")
            else:
                progress.window_finished(
                    f"{key} done: {row.get('jobs', 0)} jobs in {row.get('seconds') or 0:.1f} s"
                )
    finally:
        fleet.PROGRESS_HOOK = None
        progress.close()
        closer = getattr(runner, "close", None)
        if closer:
            closer()
    print(f"backfill {args.cluster}: {len(todo) - len(failed)} windows done, "
          f"{len(failed)} failed, {progress.jobs:,} jobs attributed in "
          f"{_fmt_secs(time.monotonic() - progress.t0)}", file=sys.stderr)
    for key, why in failed.items():
        print(f"  {key}: {why}", file=sys.stderr)
    if failed:
        print("run the same command again to retry the failed windows "
              "(done windows and jobs are skipped)", file=sys.stderr)
    return EXIT_WINDOWS_FAILED if failed else EXIT_OK


def _safe(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return "<unparseable URL>"


def _direct_runner(sink: Any, cluster: Any, config: Any, args: argparse.Namespace) -> Any:
    from attribution_dagster import fleet
    from attribution_dagster.core.settings import AnalysisSettings

    # the window's own process pool (fleet.workers) sets the parallelism: the scanner's
    # `workers` keeps its default here
    settings = AnalysisSettings(**config.analysis.model_dump(exclude={"workers"}))

    def run(key: str) -> str | None:
        try:
            fleet.list_window(sink, cluster, key, config.fleet.window)
        except fleet.WindowError as e:
            return str(e)
        out = fleet.attribute_window(
            sink, cluster, key, config.fleet.window, settings=settings,
            workers=config.fleet.workers, chunk_size=config.fleet.chunk_size, redo=args.redo,
        )
        return out.reason or None

    return run


def window_run_config(redo: bool) -> dict[str, Any]:
    """Run config of a window run: quiet console, and `redo` for `window_attributions`."""
    from attribution_dagster.cli.local_run import QUIET_RUN_CONFIG

    return {**QUIET_RUN_CONFIG, "ops": {"window_attributions": {"config": {"redo": redo}}}}


class _DagsterRunner:
    """Materializes finished_jobs + window_attributions for one window per run."""

    def __init__(self, config: Any, url: str, args: argparse.Namespace) -> None:
        import os

        from dagster import DagsterInstance

        from attribution_dagster.assets.per_window import build_window_assets
        from attribution_dagster.cli.local_run import open_instance
        from attribution_dagster.definitions import build_resources

        config = config.model_copy(update={
            "sink": config.sink.model_copy(
                update={"url": url, "url_env": None, "password_env": None}
            )
        })
        self.assets = build_window_assets(config)
        self.resources = build_resources(config)
        if args.instance is None and os.environ.get("DAGSTER_HOME"):
            self.instance = DagsterInstance.get()
        else:
            self.instance = open_instance(args.instance or Path(".dagster"))
        self.redo = args.redo

    def __call__(self, key: str) -> str | None:
        from dagster import MultiPartitionKey, materialize

        from attribution_dagster.assets.per_window import CLUSTER_DIM, WINDOW_DIM

        cluster = self.cluster
        pk = MultiPartitionKey({CLUSTER_DIM: cluster, WINDOW_DIM: key})
        from dagster import DagsterUnknownPartitionError

        tags = {"attribution/backfill": cluster}
        if self.redo:
            tags["attribution/redo"] = "true"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = materialize(
                    self.assets, instance=self.instance, partition_key=pk,
                    resources=self.resources, raise_on_error=False,
                    run_config=window_run_config(self.redo), tags=tags,
                )
            except DagsterUnknownPartitionError:
                return (f"window {key} is not a partition of the window assets (it has not "
                        "begun yet, or precedes fleet.start); --direct attributes it anyway")
        if result.success:
            return None
        for event in result.all_events:
            if event.is_step_failure and event.step_failure_data is not None:
                err = event.step_failure_data.user_failure_data
                if err is not None and err.description:
                    return err.description.splitlines()[0]
                return (event.step_failure_data.error.message.strip().splitlines() or ["?"])[0]
        return "the run failed (see the Dagster UI)"

    cluster = ""

    def close(self) -> None:
        self.instance.dispose()


def _dagster_runner(config: Any, url: str, args: argparse.Namespace) -> Any:
    runner = _DagsterRunner(config, url, args)
    runner.cluster = args.cluster
    return runner


def cmd_report(args: argparse.Namespace) -> int:
    from attribution_dagster.core.config import ConfigError, load_config
    from attribution_dagster.reports import weekly as report
    from attribution_dagster.reports.render import table
    from attribution_dagster.rules.vocabulary import category_meanings

    try:
        config = load_config(args.config)
        monday = report.parse_week(args.week)
    except (ConfigError, report.ReportError) as e:
        return _fail(str(e))
    if args.cluster and args.cluster not in config.clusters:
        known = ", ".join(sorted(config.clusters)) or "none"
        return _fail(f"cluster {args.cluster!r} is not configured (configured: {known}); "
                     "leave out --cluster for the whole fleet")
    url = _db_url(args.db, config)
    rep = report.build_report(url, monday, args.cluster, category_meanings())
    if args.json:
        paths = report.write_report(rep, args.out) if args.out else {}
        print(report.report_json(rep, {k: str(p) for k, p in paths.items()}).model_dump_json())
        return EXIT_OK
    out = args.out or config.fleet.reports_path(config.base_dir) / rep.scope / rep.week
    paths = report.write_report(rep, out)
    print(f"Weekly failure report: {rep.scope}, {rep.week}")
    print(table(report.SUMMARY_HEADER, report.summary_rows(rep)))
    shown = [0, 1, 2, 3, 5]  # kind, suspect, jobs hurt, categories, recommendation
    if rep.offenders:
        print("\nrepeat offenders:")
        print(table([report.OFFENDER_HEADER[i] for i in shown],
                    [[r[i] for i in shown] for r in report.offender_rows(rep, 10)]))
    if rep.fabric_offenders:
        print(f"\nswitches, switch ports and NVLink domains (last {rep.lookback_weeks} weeks):")
        cols = [0, 1, 2, 4, 7]  # kind, name, jobs hurt, weeks, recommendation
        print(table([report.FABRIC_HEADER[i] for i in cols],
                    [[r[i] for i in cols] for r in report.fabric_rows(rep, 10)]))
    if rep.offenders or rep.fabric_offenders:
        print(report.RECOMMENDS)
    print(f"\nwritten: {paths['html']}\n         {paths['md']}")
    return EXIT_OK

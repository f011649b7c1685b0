"""`attribution`: one-off analysis of a job case, and a batch run over a directory of cases.

Results go to stdout (`--json`: exactly one JSON object); progress and errors go to stderr.
Errors are one line naming the file and the problem; tracebacks only with `--debug`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NoReturn

from attribution_dagster import __version__
from attribution_dagster.cli.args import add_config_arg, positive_int, seconds
from attribution_dagster.connectors.base import JobNotFound, SourceError
from attribution_dagster.core.config import ConfigError
from attribution_dagster.core.settings import AnalysisSettings

EXIT_OK = 0
EXIT_INPUT = 2  # nothing could be analysed: bad path, bad context.json, bad option, no such job
EXIT_INTERNAL = 3
EXIT_SOURCE = 4  # a scheduler or evidence back-end could not answer

_EPILOG = """\
examples:
  attribution analyze samples/xid149-nvlink-3node
  attribution analyze samples/xid149-nvlink-3node --json | jq .category
  attribution discover atlas --since 2026-11-02T00:00Z --state FAILED,NODE_FAIL --table
  attribution analyze atlas/4412201       # context from atlas's scheduler (attribution.yaml)
  attribution export atlas/4412201 /tmp/case-4412201
  attribution run samples                 # every case, through Dagster, into SQLite
  attribution run samples --direct --db postgresql+psycopg://user@host/db
  attribution rules                       # the rule catalog (--markdown: docs/rules.md)
  attribution backfill atlas --since 2026-10-01 --until 2026-11-12
  attribution report --week 2026-W46 --cluster atlas --out /tmp/report

every command takes --config FILE before or after its name.
exit codes: 0 an analysis was made (whatever its outcome), 2 bad input or configuration
  (a bad option value, an unknown cluster or job), 3 internal error, 4 a scheduler or
  back-end could not answer
"""


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line on stderr and exit 2 (`attribution analyze: error: ...`)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_settings_args(p: argparse.ArgumentParser) -> None:
    d = AnalysisSettings()
    g = p.add_argument_group("analysis window")
    g.add_argument("--lead", type=seconds, default=d.lead_seconds, metavar="S",
                   help=f"read evidence S seconds before job start (default {d.lead_seconds:g})")
    g.add_argument("--lag", type=seconds, default=d.lag_seconds, metavar="S",
                   help=f"and S seconds after job end (default {d.lag_seconds:g})")
    g.add_argument("--skew", type=seconds, default=d.skew_seconds, metavar="S",
                   help=f"clock skew tolerated between nodes (default {d.skew_seconds:g})")
    g.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="scanner processes for large cases (default: all cores)")


class _UsageError(ValueError):
    """A bad option value found after parsing; exit 2 with this one line."""


def _settings(args: argparse.Namespace) -> AnalysisSettings:
    from pydantic import ValidationError

    try:
        return AnalysisSettings(
            lead_seconds=args.lead, lag_seconds=args.lag, skew_seconds=args.skew,
            workers=args.workers,
        )
    except ValidationError as e:  # the argparse types should have caught it: still one line
        err = e.errors()[0]
        flag = {"lead_seconds": "--lead", "lag_seconds": "--lag", "skew_seconds": "--skew",
                "workers": "--workers"}.get(str(err["loc"][0]) if err["loc"] else "", "option")
        raise _UsageError(f"argument {flag}: {err['msg']}, got {err.get('input')!r}") from None


def build_parser() -> argparse.ArgumentParser:
    # Long on purpose: one declaration of every subcommand and flag, read top to bottom like
    # `--help`
    p = _Parser(
        prog="attribution",
        description="Why did this GPU job fail, and where should I look first?",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    p.add_argument("--config", type=Path, metavar="FILE", default=None,
                   help="attribution.yaml with the clusters (default: $ATTRIBUTION_CONFIG, "
                   "else ./attribution.yaml); every command also takes it after its name")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    a = sub.add_parser(
        "analyze",
        help="analyse one job: a case directory, or CLUSTER/JOB_ID from a scheduler",
        description="Analyse one job. CASE is a case directory (context.json, logs/<node>/*, "
        "metrics/*.prom; a case holding only context.json reads its cluster's configured "
        "sources). CLUSTER/JOB_ID asks that cluster's scheduler for the context and reads the "
        "evidence from the cluster's logs and metrics sources (attribution.yaml).",
    )
    a.add_argument("case", metavar="CASE|CLUSTER/JOB_ID",
                   help="case directory, or a job of a configured cluster (atlas/4412201)")
    a.add_argument("--json", action="store_true",
                   help="print the result contract as one JSON object")
    a.add_argument("--db", metavar="URL",
                   help="also store the result (SQLAlchemy URL or SQLite path)")
    add_config_arg(a)
    _add_settings_args(a)

    r = sub.add_parser(
        "run",
        help="analyse every case under a directory and store the results",
        description="Analyse every case under DIR (default: samples), print a summary table and "
        "write all results to SQLite (or --db URL). Goes through the Dagster assets in-process "
        "unless --direct.",
    )
    r.add_argument("cases", type=Path, nargs="?", default=Path("samples"), metavar="DIR",
                   help="directory of case directories (default: samples)")
    r.add_argument("--db", metavar="URL", help="SQLAlchemy URL or SQLite path "
                   "(default: .attribution/results.db)")
    r.add_argument("--direct", action="store_true",
                   help="call the engine directly, without Dagster")
    r.add_argument("--instance", type=Path, metavar="DIR",
                   help="persistent Dagster instance (runs then show in `make ui`; "
                   "default: a throwaway one)")
    add_config_arg(r)
    _add_settings_args(r)

    d = sub.add_parser(
        "discover",
        help="list a cluster's finished jobs as execution contexts",
        description="Ask CLUSTER's scheduler for the jobs that ENDED in [--since, --until) and "
        "print each one's execution context as one JSON object per line (the context.json "
        "vocabulary), or a table with --table.",
    )
    d.add_argument("cluster", help="a cluster name from attribution.yaml")
    d.add_argument("--since", required=True, metavar="TIME",
                   help="RFC 3339 time or date, e.g. 2026-11-02T00:00Z or 2026-11-02")
    d.add_argument("--until", metavar="TIME", help="default: now")
    d.add_argument("--state", metavar="S[,S...]",
                   help="final states to keep: FAILED,NODE_FAIL,TIMEOUT,... (default: all)")
    d.add_argument("--partition", action="append", default=[], metavar="P",
                   help="Slurm partition (repeatable)")
    d.add_argument("--account", action="append", default=[], metavar="A")
    d.add_argument("--user", action="append", default=[], metavar="U")
    d.add_argument("--namespace", action="append", default=[], metavar="NS",
                   help="Kubernetes namespace (repeatable)")
    d.add_argument("--limit", type=positive_int, metavar="N",
                   help="at most N jobs (oldest end first)")
    d.add_argument("--table", action="store_true", help="a table for people instead of JSON")
    add_config_arg(d)

    e = sub.add_parser(
        "export",
        help="write a cluster's job as a case directory (context + the evidence read)",
        description="Resolve CLUSTER/JOB_ID like `analyze`, then write DIR/context.json and "
        "every line read (hits, each file's last line and progress line) at its original "
        "file and line number under DIR/logs/ (empty lines between; metric samples at their "
        ".prom lines, Prometheus answers in DIR/metrics/exported.prom), so the job can be "
        "attached to a ticket or added to tests and analysed offline with the same result. "
        "Prints each file written.",
    )
    e.add_argument("job", metavar="CLUSTER/JOB_ID")
    e.add_argument("out", type=Path, metavar="DIR", help="new directory for the case")
    add_config_arg(e)
    _add_settings_args(e)

    from attribution_dagster.cli.fleet import add_fleet_parsers

    add_fleet_parsers(sub)  # backfill, report (docs/fleet.md)

    from attribution_dagster.cli.catalog import add_catalog_parsers

    add_catalog_parsers(sub, add_config_arg)  # rules, parsers (docs/rules.md, docs/parsers.md)
    return p


def _fail(msg: str, code: int = EXIT_INPUT) -> int:
    from attribution_dagster.core.secrets import redact  # an echoed credential, masked

    print(f"attribution: error: {redact(msg)}", file=sys.stderr)
    return code


def _sink_url(db: str | None) -> str:
    from attribution_dagster.core.database import default_sqlite_url

    if not db:
        return default_sqlite_url(Path.cwd())
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).resolve()}"


def _config(args: argparse.Namespace):  # -> AttributionConfig
    """The configuration, every cluster's back-end blocks validated (ConfigError naming the
    file, cluster, block and key: exit 2)."""
    from attribution_dagster.connectors.clusters import load_checked_config

    if not hasattr(args, "_config"):
        args._config = load_checked_config(args.config)
    return args._config


def _cluster(args: argparse.Namespace, name: str):  # -> Cluster
    from attribution_dagster.connectors.clusters import Cluster
    from attribution_dagster.core.config import ConfigError

    clusters = _config(args).clusters
    if name not in clusters:
        known = ", ".join(sorted(clusters)) or "none"
        raise ConfigError(f"no cluster named {name!r} in the configuration (configured: {known})")
    return Cluster(name, clusters[name])


def _resolve_job(args: argparse.Namespace, ref: str):  # -> tuple[Cluster, ExecutionContext]
    from attribution_dagster.connectors.clusters import split_job_ref
    from attribution_dagster.core.config import ConfigError

    clusters = _config(args).clusters
    parts = split_job_ref(ref, clusters)
    if parts is None:
        known = ", ".join(sorted(clusters)) or "none configured"
        raise ConfigError(
            f"{ref}: not a case directory, and not CLUSTER/JOB_ID of a configured cluster "
            f"(clusters: {known})"
        )
    cluster = _cluster(args, parts[0])
    try:
        return cluster, cluster.scheduler.get_job(parts[1])
    except JobNotFound as e:
        raise ConfigError(not_found_message(parts[1], cluster.name, str(e))) from None


def not_found_message(job_id: str, cluster: str, detail: str) -> str:
    """`job 999999 not found in lab (under /data/cases)`: the job, the cluster, and where
    the scheduler looked (its own words, without repeating the job)."""
    prefix = f"job {job_id} not found "
    where = detail[len(prefix):] if detail.startswith(prefix) else detail
    return f"job {job_id} not found in {cluster}" + (f" ({where})" if where else "")


def _sources(args: argparse.Namespace, ctx):  # -> EvidenceSources | None
    """The configured back-ends of the case's cluster: `collect_evidence` takes from them the
    kinds of evidence the case directory lacks, as the Dagster assets do."""
    from attribution_dagster.connectors.clusters import Cluster

    if not hasattr(args, "_clusters"):  # read once per command, not once per case
        args._clusters = {n: Cluster(n, c) for n, c in _config(args).clusters.items()}
    cluster = args._clusters.get(ctx.cluster) if ctx.cluster else None
    return cluster.sources if cluster is not None else None


def cmd_analyze(args: argparse.Namespace) -> int:
    from attribution_dagster.connectors.clusters import split_job_ref
    from attribution_dagster.connectors.static.client import ContextError
    from attribution_dagster.pipeline import analyze_context, load_context
    from attribution_dagster.reports.render import render_result

    settings = _settings(args)
    target = Path(args.case)
    try:
        head = args.case.split("/", 1)[0]
        is_job = not target.exists() and (
            split_job_ref(args.case, _config(args).clusters) is not None
            or ("/" in args.case and head and not Path(head).exists())
        )
        if not is_job:
            ctx = load_context(target)
            result = analyze_context(ctx, settings, case=target, sources=_sources(args, ctx))
        else:
            cluster, ctx = _resolve_job(args, args.case)
            result = analyze_context(ctx, settings, sources=cluster.sources)
    except ContextError as e:
        return _fail(str(e))
    if args.db:
        from attribution_dagster.sinks.sql import SqlSink

        SqlSink(_sink_url(args.db)).write([result])
    if args.json:
        sys.stdout.write(result.model_dump_json() + "\n")
    else:
        print(render_result(result))
    return EXIT_OK


def _when(text: str, flag: str):  # -> datetime
    from datetime import datetime, timezone

    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{flag} {text!r} is not an RFC 3339 time or a date") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def cmd_discover(args: argparse.Namespace) -> int:
    from attribution_dagster.connectors.base import JobQuery
    from attribution_dagster.core.context import JobState
    from attribution_dagster.reports.render import table

    try:
        states = tuple(JobState(s.strip().upper()) for s in (args.state or "").split(",") if s)
    except ValueError as e:
        return _fail(f"--state: {e}; use {', '.join(s.value for s in JobState)}")
    try:
        query = JobQuery(
            since=_when(args.since, "--since"),
            until=_when(args.until, "--until") if args.until else None,
            states=states,
            partitions=tuple(args.partition),
            accounts=tuple(args.account),
            users=tuple(args.user),
            namespaces=tuple(args.namespace),
            limit=args.limit,
        )
    except ValueError as e:
        return _fail(str(e))
    jobs = _cluster(args, args.cluster).scheduler.finished_jobs(query)
    if args.table:
        rows = [
            [c.job_id, c.state.value, "" if c.exit_code is None else str(c.exit_code),
             c.end.strftime("%Y-%m-%d %H:%M:%S"), str(len(c.nodes)),
             ",".join(c.nodes[:4]) + (" ..." if len(c.nodes) > 4 else ""), c.reason or ""]
            for c in jobs
        ]
        print(table(["job", "state", "exit", "ended (UTC)", "nodes", "node names", "reason"],
                    rows))
        print(f"\n{len(jobs)} finished jobs on {args.cluster}", file=sys.stderr)
    else:
        for c in jobs:
            sys.stdout.write(c.model_dump_json(exclude_none=True, exclude={"case_dir"}) + "\n")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from attribution_dagster.pipeline import collect_evidence
    from attribution_dagster.reports.export import describe, write_case

    cluster, ctx = _resolve_job(args, args.job)
    raw = collect_evidence(None, ctx, _settings(args), sources=cluster.sources)
    try:
        summary = write_case(args.out, ctx, raw)
    except FileExistsError as e:
        return _fail(str(e))
    failed = [c.source for c in raw.coverage if c.status in ("failed", "partial")]
    print(f"wrote {args.out}: {summary.lines} log lines kept in "
          f"{sum(1 for f in summary.files if f.path.startswith('logs/'))} files, "
          f"{summary.samples} metric samples")
    for row in describe(summary):
        print(f"  {row}")
    d = AnalysisSettings()
    flags = [f"--{n} {v:g}" for n, v, default in (
        ("lead", args.lead, d.lead_seconds), ("lag", args.lag, d.lag_seconds),
        ("skew", args.skew, d.skew_seconds)) if v != default]
    if flags:
        print(f"analyse it with the same window: attribution analyze {args.out} "
              + " ".join(flags))
    if failed:
        print(f"attribution: warning: incomplete sources: {', '.join(failed)} (the export "
              "holds what they did answer)", file=sys.stderr)
    return EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    from attribution_dagster.connectors.static.client import ContextError, StaticContextClient
    from attribution_dagster.core.config import ConfigError
    from attribution_dagster.reports.render import summary_rows, table

    root: Path = args.cases
    if not root.is_dir():
        return _fail(f"case directory does not exist: {root}")
    url = _sink_url(args.db)
    settings = _settings(args)
    t0 = time.perf_counter()
    if args.direct:
        from attribution_dagster.pipeline import analyze_context, load_context
        from attribution_dagster.sinks.sql import SqlSink

        results = []
        for case in StaticContextClient().list_cases(root):
            try:
                ctx = load_context(case)
                results.append(
                    analyze_context(ctx, settings, case=case, sources=_sources(args, ctx))
                )
            except ContextError as e:
                print(f"attribution: skipped: {e}", file=sys.stderr)
        SqlSink(url).write(results)
    else:
        from attribution_dagster.cli.local_run import run_cases_report

        try:
            results = run_cases_report(
                root, url, settings=settings, instance_dir=args.instance, config=_config(args)
            ).results
        except ConfigError as e:
            return _fail(str(e))
    results.sort(key=lambda r: (r.cluster or "", r.job_id))
    print(table(["job", "status", "category", "suspect nodes", "cause began (UTC)"],
                summary_rows(results)))
    counts: dict[str, int] = {}
    for r in results:
        counts[r.status] = counts.get(r.status, 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    how = "directly" if args.direct else "through Dagster"
    print(f"\n{len(results)} jobs in {time.perf_counter() - t0:.1f} s {how}: {tally}")
    print(f"results: {url}")
    if args.instance:
        print(f"dagster instance: {args.instance.resolve()} (open it with `make ui`)")
    return EXIT_OK


def _is_database_error(e: BaseException) -> bool:
    """A SQLAlchemy error, told without importing SQLAlchemy (0.15-0.2 s of every CLI start
    that never opens a database): if it was never imported, `e` cannot be one of its errors."""
    exc = sys.modules.get("sqlalchemy.exc")
    return exc is not None and isinstance(e, exc.SQLAlchemyError)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_INPUT
    try:
        if args.command == "analyze":
            return cmd_analyze(args)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "discover":
            return cmd_discover(args)
        if args.command == "export":
            return cmd_export(args)
        if args.command in ("backfill", "report"):
            from attribution_dagster.cli import fleet as cli_fleet

            return cli_fleet.cmd_backfill(args) if args.command == "backfill" else (
                cli_fleet.cmd_report(args))
        from attribution_dagster.cli import catalog as cli_catalog

        return cli_catalog.cmd_rules(args) if args.command == "rules" else (
            cli_catalog.cmd_parsers(args))
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except (ConfigError, _UsageError) as e:
        return _fail(str(e))
    except SourceError as e:
        what = "try again later" if e.transient else "check the configuration"
        return _fail(f"{e} ({what})", EXIT_SOURCE)
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # last line of defence: one line, never a traceback by default
        if _is_database_error(e):  # the results database: unreachable, login refused, locked
            first = (str(getattr(e, "orig", None) or e).strip().splitlines() or ["?"])[0]
            return _fail(f"the results database could not be used: {first} (check --db or "
                         "sink.url in attribution.yaml)", EXIT_SOURCE)
        if args.debug:
            raise
        where = f" while analysing {args.case}" if getattr(args, "case", None) else ""
        return _fail(f"internal error{where}: {type(e).__name__}: {e} (rerun with --debug)",
                     EXIT_INTERNAL)


if __name__ == "__main__":
    sys.exit(main())

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
from attribution_dagster.models import AnalysisSettings

EXIT_OK = 0
EXIT_INPUT = 2  # nothing could be analysed: bad path, bad context.json
EXIT_INTERNAL = 3

_EPILOG = """\
examples:
  attribution analyze samples/xid149-nvlink-3node
  attribution analyze samples/xid149-nvlink-3node --json | jq .category
  attribution run samples                 # every case, through Dagster, into SQLite
  attribution run samples --direct --db postgresql+psycopg://user@host/db
  attribution rules                       # the rule catalog
  attribution backfill atlas --since 2026-10-01 --until 2026-11-12
  attribution report --week 2026-W46 --cluster atlas --out /tmp/report

exit codes: 0 an analysis was made (whatever its outcome), 2 bad input, 3 internal error
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"attribution: error: {message}\n")


def _add_settings_args(p: argparse.ArgumentParser) -> None:
    d = AnalysisSettings()
    g = p.add_argument_group("analysis window")
    g.add_argument("--lead", type=float, default=d.lead_seconds, metavar="S",
                   help=f"read evidence S seconds before job start (default {d.lead_seconds:g})")
    g.add_argument("--lag", type=float, default=d.lag_seconds, metavar="S",
                   help=f"and S seconds after job end (default {d.lag_seconds:g})")
    g.add_argument("--skew", type=float, default=d.skew_seconds, metavar="S",
                   help=f"clock skew tolerated between nodes (default {d.skew_seconds:g})")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="scanner processes for large cases (default: all cores)")


def _settings(args: argparse.Namespace) -> AnalysisSettings:
    return AnalysisSettings(
        lead_seconds=args.lead, lag_seconds=args.lag, skew_seconds=args.skew, workers=args.workers
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="attribution",
        description="Why did this GPU job fail, and where should I look first?",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks on internal errors")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    a = sub.add_parser(
        "analyze",
        help="analyse one job case directory",
        description="Analyse one job case: context.json, logs/<node>/*, metrics/*.prom.",
    )
    a.add_argument("case", type=Path, help="case directory (holds context.json)")
    a.add_argument("--json", action="store_true",
                   help="print the result contract as one JSON object")
    a.add_argument("--db", metavar="URL",
                   help="also store the result (SQLAlchemy URL or SQLite path)")
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
    _add_settings_args(r)

    from attribution_dagster.cli_fleet import add_fleet_parsers

    add_fleet_parsers(sub)  # backfill, report (docs/fleet.md)

    sub.add_parser("rules", help="list the attribution rules (docs/rules.md has the details)")
    sub.add_parser("parsers", help="list the log/metric parsers (docs/parsers.md)")
    return p


def _fail(msg: str, code: int = EXIT_INPUT) -> int:
    print(f"attribution: error: {msg}", file=sys.stderr)
    return code


def _sink_url(db: str | None) -> str:
    from attribution_dagster.sinks.sql import default_sqlite_url

    if not db:
        return default_sqlite_url(Path.cwd())
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).resolve()}"


def cmd_analyze(args: argparse.Namespace) -> int:
    from attribution_dagster.connectors.static import ContextError
    from attribution_dagster.pipeline import analyze_case
    from attribution_dagster.render import render_result

    try:
        result = analyze_case(args.case, _settings(args))
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


def cmd_run(args: argparse.Namespace) -> int:
    from attribution_dagster.config import ConfigError
    from attribution_dagster.connectors.static import ContextError, StaticContextClient
    from attribution_dagster.render import summary_rows, table

    root: Path = args.cases
    if not root.is_dir():
        return _fail(f"case directory does not exist: {root}")
    url = _sink_url(args.db)
    settings = _settings(args)
    t0 = time.perf_counter()
    if args.direct:
        from attribution_dagster.pipeline import analyze_case
        from attribution_dagster.sinks.sql import SqlSink

        results = []
        for case in StaticContextClient().list_cases(root):
            try:
                results.append(analyze_case(case, settings))
            except ContextError as e:
                print(f"attribution: skipped: {e}", file=sys.stderr)
        SqlSink(url).write(results)
    else:
        from attribution_dagster.local_run import run_cases

        try:
            results = run_cases(root, url, settings=settings, instance_dir=args.instance)
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


def cmd_catalog(kind: str) -> int:
    from attribution_dagster.render import table

    if kind == "rules":
        from attribution_dagster.pipeline import engine

        rows = [[d.get("id", ""), d.get("role", ""), d.get("category") or "-",
                 str(d.get("weight", ""))] for d in engine().describe()]
        print(table(["rule", "role", "category", "weight"], rows))
        print(f"\nrules version {engine().rules_version}")
    else:
        from attribution_dagster.pipeline import catalog

        rows = [[d.get("id", ""), d.get("kind", ""), ", ".join(d.get("anchors", []))[:60]]
                for d in catalog().describe()]
        print(table(["parser", "kind", "anchors"], rows))
    return EXIT_OK


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
        if args.command in ("backfill", "report"):
            from attribution_dagster import cli_fleet

            return cli_fleet.cmd_backfill(args) if args.command == "backfill" else (
                cli_fleet.cmd_report(args))
        return cmd_catalog(args.command)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return EXIT_OK
    except Exception as e:  # last line of defence: one line, never a traceback by default
        if args.debug:
            raise
        where = f" while analysing {args.case}" if getattr(args, "case", None) else ""
        return _fail(f"internal error{where}: {type(e).__name__}: {e} (rerun with --debug)",
                     EXIT_INTERNAL)


if __name__ == "__main__":
    sys.exit(main())

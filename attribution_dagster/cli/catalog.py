"""`attribution rules` and `attribution parsers`: the two catalogs, as a table or as the docs.

    attribution rules                         # the rule catalog as a table
    attribution rules --markdown > docs/rules.md
    attribution rules --rules my-rules.yaml   # validate another rules file
    attribution parsers                       # the parser catalog as a table
    attribution parsers --markdown > docs/parsers.md
    attribution parsers --anchors             # the prefilter literals, one a line

The Markdown comes from rules/docs.py (plain functions of a loaded catalog); `make docs`
regenerates both files and the tests fail when the committed ones are stale.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

EXIT_OK = 0
EXIT_INPUT = 2


AddConfig = Callable[[argparse.ArgumentParser], None]


def add_catalog_parsers(sub: Any, add_config_arg: AddConfig) -> None:
    """The `rules` and `parsers` subcommands (cli.app.build_parser calls this)."""
    r = sub.add_parser(
        "rules",
        help="list the attribution rules (docs/rules.md has the details)",
        description="The rule catalog (rules.yaml): a table, or with --markdown docs/rules.md.",
    )
    r.add_argument("--markdown", action="store_true", help="print docs/rules.md")
    r.add_argument("--rules", type=Path, metavar="FILE", default=None,
                   help="a rules file to load and validate instead of the packaged one")
    add_config_arg(r)
    p = sub.add_parser(
        "parsers",
        help="list the log/metric parsers (docs/parsers.md)",
        description="The parser catalog (parsers.yaml): a table, or with --markdown "
        "docs/parsers.md.",
    )
    how = p.add_mutually_exclusive_group()
    how.add_argument("--markdown", action="store_true", help="print docs/parsers.md")
    how.add_argument("--anchors", action="store_true", help="print the prefilter literals")
    add_config_arg(p)


def cmd_rules(args: argparse.Namespace) -> int:
    from attribution_dagster.reports.render import table
    from attribution_dagster.rules import catalog
    from attribution_dagster.rules.docs import rules_markdown
    from attribution_dagster.rules.engine import load_engine
    from attribution_dagster.rules.engine.rulebook import RulebookError

    try:
        engine = load_engine(args.rules) if args.rules else catalog.engine()
    except RulebookError as exc:
        print(f"attribution: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if args.markdown:
        sys.stdout.write(rules_markdown(engine))
        return EXIT_OK
    rows = [[d["id"], d["role"], d["category"] or "-", str(d["weight"])]
            for d in engine.describe()]  # fmt: skip
    print(table(["rule", "role", "category", "weight"], rows))
    print(f"\nrules version {engine.rules_version}: {len(engine.rules)} rules OK")
    return EXIT_OK


def cmd_parsers(args: argparse.Namespace) -> int:
    from attribution_dagster.reports.render import table
    from attribution_dagster.rules.docs import parsers_markdown
    from attribution_dagster.rules.parsers import CatalogError, load_catalog

    try:  # read afresh, every regex compiled: this command is how an edit is checked
        cat = load_catalog()
    except CatalogError as exc:
        print(f"attribution: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    if args.markdown:
        sys.stdout.write(parsers_markdown(cat))
    elif args.anchors:
        for a in cat.anchors():
            print(a.literal)
    else:
        rows = [[d.get("id", ""), d.get("kind", ""), ", ".join(d.get("anchors", []))[:60]]
                for d in cat.describe()]  # fmt: skip
        print(table(["parser", "kind", "anchors"], rows))
    return EXIT_OK

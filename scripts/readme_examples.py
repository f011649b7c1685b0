"""README examples from real runs, so they cannot drift (issue 19 item 6).

    python scripts/readme_examples.py          # rewrite the examples in README.md
    python scripts/readme_examples.py --check  # exit 1 and show the diff when one differs

An example is a fenced block between two markers; the opening marker holds the command:

    <!-- example: attribution analyze samples/xid149-nvlink-3node head=14 -->
    ```
    $ attribution analyze samples/xid149-nvlink-3node
    ...its real output...
    ```
    <!-- /example -->

Commands: `attribution ARGS...` (the CLI, in process) and `make run` (what the Makefile
runs: `attribution run samples --instance .dagster`, into a temporary directory shown as
/path/to/attribution-dagster). `head=N` keeps the first N lines of the output and
`tail=M` the last M, with a `...` line between. tests/test_readme_examples.py runs every
example and compares; only the elapsed seconds (`in 2.4 s`) and the rule catalog's hash
are masked there.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHOWN_ROOT = "/path/to/attribution-dagster"
EXAMPLE = re.compile(
    r"(?P<open><!-- example: (?P<spec>[^\n]*?) -->\n)```\n(?P<body>.*?)```\n"
    r"(?P<close><!-- /example -->)",
    re.S,
)
ELAPSED = re.compile(r"\bin \d+(?:\.\d+)? s\b")
RULES_HASH = re.compile(r"(rules \S+?)\+[0-9a-f]{6,}")  # the catalog's content hash


class ExampleError(Exception):
    """A marker whose command cannot run: the message names it."""


def _cli(args: list[str], cwd: Path) -> str:
    from attribution_dagster.cli.app import main

    out = io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            code = main(args)
    finally:
        os.chdir(old)
    if code not in (0, 1):
        raise ExampleError(f"attribution {shlex.join(args)} exited {code}")
    return out.getvalue()


def run(spec: str) -> str:
    """The block for one marker: the command line as typed, then its (cut) output."""
    words = shlex.split(spec)
    opts = dict(w.split("=", 1) for w in words if re.fullmatch(r"(head|tail)=\d+", w))
    words = [w for w in words if not re.fullmatch(r"(head|tail)=\d+", w)]
    if words[:1] == ["attribution"]:
        text = _cli(words[1:], REPO)
    elif words == ["make", "run"]:
        with tempfile.TemporaryDirectory(prefix="readme-") as tmp:
            # the Makefile's command, run where the README says the clone is
            root = Path(tmp)
            (root / ".attribution").mkdir()
            text = _cli(
                ["run", str(REPO / "samples"), "--instance", str(root / ".dagster"),
                 "--db", f"sqlite:///{root}/.attribution/results.db"],
                root,
            ).replace(str(root.resolve()), SHOWN_ROOT).replace(str(root), SHOWN_ROOT)
    else:
        raise ExampleError(f"unknown example command: {spec!r}")
    lines = text.rstrip("\n").splitlines()
    head, tail = int(opts.get("head", 0)), int(opts.get("tail", 0))
    if (head or tail) and head + tail < len(lines):
        lines = lines[:head] + ["..."] + (lines[-tail:] if tail else [])
    return "\n".join([f"$ {' '.join(words)}", *lines]) + "\n"


def regenerate(text: str) -> str:
    """README text with every example's block replaced by a fresh run."""
    def fresh(m: re.Match[str]) -> str:
        return f"{m['open']}```\n{run(m['spec'])}```\n{m['close']}"

    return EXAMPLE.sub(fresh, text)


def examples(text: str) -> dict[str, str]:
    """marker command -> the block the README holds."""
    return {m["spec"]: m["body"] for m in EXAMPLE.finditer(text)}


def mask(text: str) -> str:
    """What may differ without the example being wrong: the elapsed seconds, and the hash
    of the rule catalog in `rules 2026.12.1+8ba77400` (any rules edit changes it; the
    version before it is compared)."""
    return RULES_HASH.sub(r"\1+<hash>", ELAPSED.sub("in <elapsed> s", text))


def differences(text: str) -> list[str]:
    """A unified diff per example whose README block is not its real output (masked)."""
    out = []
    for spec, shown in examples(text).items():
        real = run(spec)
        if mask(real) != mask(shown):
            out.append("".join(difflib.unified_diff(
                shown.splitlines(keepends=True), real.splitlines(keepends=True),
                f"README.md: {spec}", "real output",
            )))
    return out


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    if not examples(text):
        print("readme_examples: no <!-- example: ... --> markers in README.md", file=sys.stderr)
        return 1
    if argv[:1] == ["--check"]:
        diffs = differences(text)
        for d in diffs:
            print(d)
        return 1 if diffs else 0
    new = regenerate(text)
    if new != text:
        README.write_text(new, encoding="utf-8")
    print(f"readme_examples: {len(examples(new))} examples "
          f"{'rewritten' if new != text else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

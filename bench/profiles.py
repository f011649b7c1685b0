"""Issue 16 profiles: each generated case (bench/generate.py PROFILES) analysed by
`attribution analyze` against a 6-term grep and `cat` over the same files, in the same run.

    grep -r -c -E 'Xid|NCCL|error|fail|timeout|link down' <case>/logs > file   (a file, not
        /dev/null: GNU grep stops at the first match when writing to /dev/null)
    cat <every log file> > /dev/null
    attribution analyze <case> --json > file

Each is a child process; wall time is the best of --repeat runs, peak RSS the largest
(os.wait4: the child and its waited-for descendants, the scanner pool included). The
machine's cores are shared, so only ratios measured in the same run mean anything.

    python bench/profiles.py [--only nccl_init,xid_storm] [--scale 0.25] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from generate import PROFILES  # noqa: E402
from run_bench import _ENV, best_of, run  # noqa: E402,F401

GREP6 = "Xid|NCCL|error|fail|timeout|link down"
# default size factor per profile: what `make bench` runs (a few minutes on 2 cores)
DEFAULT_SCALE = {
    "nccl_init": 1.0,
    "xid_storm": 1.0,
    "watchdog_8192": 1.0,
    "week_steps": 1.0,
    "long_lines": 0.5,
    "today": 1.0,
}


def micro_match_us(n: int = 20000) -> float:
    """Cost of one matching line through the normalizer (facts, no fold): µs per line."""
    from datetime import datetime, timezone

    from attribution_dagster.core.evidence import RawRecord
    from attribution_dagster.core.locators import FileLine
    from attribution_dagster.pipeline import catalog
    from attribution_dagster.rules.parsers import _example_ctx

    cat = catalog()
    ctx = _example_ctx(["node-a", "node-b"])
    t = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
    recs = [
        RawRecord.model_construct(
            source="files",
            node="node-a",
            locator=FileLine.model_construct(path="logs/node-a/app.log", line=i + 1),
            time=t,
            time_quality="exact",
            time_latest=None,
            stream="app.log",
            text=f"node-b:1123:1200 [3] NCCL INFO comm 0x{i:x} rank {i % 64} nRanks 512 "
            "nNodes 64 localRanks 8 localRank 3 MNNVL 0 - Init COMPLETE",
            count=1,
            time_last=None,
            locator_last=None,
            last_of_file=False,
        )
        for i in range(n)
    ]
    cat.facts(recs[0], ctx)
    t0 = time.perf_counter()
    for r in recs:
        cat.facts(r, ctx)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="issue 16 profiles vs grep and cat")
    ap.add_argument("--root", type=Path, default=Path("/tmp/attr-bench/profiles"))
    ap.add_argument("--only", default="", help="comma-separated profile names")
    ap.add_argument("--scale", type=float, default=None, help="size factor for every profile")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--regenerate", action="store_true")
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--micro", action="store_true", help="only the match micro-benchmark")
    args = ap.parse_args(argv)
    if args.micro:
        print(f"{micro_match_us():.1f}")
        return 0
    names = [n for n in (args.only.split(",") if args.only else PROFILES) if n]
    py = sys.executable
    analyze = [py, "-m", "attribution_dagster.cli", "analyze"]
    # in children: a child's peak RSS includes what it was forked from, so this process
    # stays small (the generator and the micro-benchmark run in processes of their own)
    micro = subprocess.run(
        [py, str(Path(__file__)), "--micro"], capture_output=True, text=True, env=_ENV
    ).stdout.strip()
    print(f"match micro-benchmark: {micro} µs per matching line (target <= 10)")
    rows = []
    head = (
        f"{'profile':14} {'MB':>7} {'files':>5} {'grep s':>7} {'cat s':>6} {'ours s':>7} "
        f"{'x grep':>6} {'x cat':>6} {'RSS MB':>6}  answer"
    )
    print(head)
    for name in names:
        scale = args.scale if args.scale is not None else DEFAULT_SCALE[name]
        case = args.root / f"{name}-{scale:g}"
        if args.regenerate or not (case / "context.json").exists():
            t0 = time.perf_counter()
            subprocess.run(
                [
                    py,
                    str(ROOT / "bench" / "generate.py"),
                    "--profile",
                    name,
                    "--out",
                    str(case),
                    "--scale",
                    str(scale),
                ],
                check=True,
                env=_ENV,
                stdout=subprocess.DEVNULL,
            )
            print(f"  (generated {case} in {time.perf_counter() - t0:.0f}s)", file=sys.stderr)
        files = sorted(str(p) for p in (case / "logs").rglob("*") if p.is_file())
        mb = sum(Path(f).stat().st_size for f in files) / 1e6
        work = case.parent
        run(["cat", *files], Path("/dev/null"))  # warm the page cache
        grep = best_of(
            args.repeat, ["grep", "-r", "-c", "-E", GREP6, str(case / "logs")], work / "grep.out"
        )
        cat = best_of(args.repeat, ["cat", *files], Path("/dev/null"))
        ours = best_of(args.repeat, [*analyze, str(case), "--json"], work / f"{name}.json")
        expected = json.loads((case / "context.json").read_text())["expected"]
        try:
            res = json.loads((work / f"{name}.json").read_text())
        except json.JSONDecodeError:
            res = {}
        right = res.get("category") == expected["category"] and res.get("suspect_nodes") == [
            expected["node"]
        ]
        row = {
            "profile": name,
            "scale": scale,
            "mb": round(mb),
            "files": len(files),
            "grep_s": round(grep[0], 2),
            "cat_s": round(cat[0], 2),
            "ours_s": round(ours[0], 2),
            "x_grep": round(ours[0] / grep[0], 2),
            "x_cat": round(ours[0] / cat[0], 2),
            "rss_mb": round(ours[1]),
            "right": right,
            "got": [res.get("category"), res.get("suspect_nodes")],
        }
        rows.append(row)
        print(
            f"{name:14} {mb:7.0f} {len(files):5} {grep[0]:7.2f} {cat[0]:6.2f} {ours[0]:7.2f} "
            f"{row['x_grep']:5.2f}x {row['x_cat']:5.2f}x {ours[1]:6.0f}  "
            f"{'right' if right else 'WRONG ' + str(row['got'])}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0 if all(r["right"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

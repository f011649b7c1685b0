"""Write an OpenMetrics fixture holding exactly the samples of the cases' `metrics/*.prom`.

`promtool tsdb create-blocks-from openmetrics` wants what a `.prom` case file does not give:
timestamps in SECONDS (milliseconds would be read as seconds, year ~58000, silently),
every series sorted by time (out-of-order samples are dropped without a word), the samples
of one family together, and `# EOF` last. Each series gets the label
`attribution_case="<case directory name>"` so cases whose node names and times overlap stay
apart in one Prometheus; a test selects one case with `extra_selector`.

    python scripts/prom_fixture.py OUT.om [CASE_DIR ...]   # default: samples/*, tests/heldout/*

Samples without a timestamp are skipped (the file reader skips them too); a second sample
of a series at the same timestamp is dropped (Prometheus would keep one).
"""

from __future__ import annotations

import gzip
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from attribution_dagster.core.formats.promtext import PromFile, iter_samples  # noqa: E402

CASE_LABEL = "attribution_case"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(v: float) -> str:
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def case_dirs(roots: list[Path]) -> list[Path]:
    out = []
    for root in roots:
        if (root / "metrics").is_dir():
            out.append(root)
        elif root.is_dir():
            out.extend(sorted(p for p in root.iterdir() if (p / "metrics").is_dir()))
    return out


def collect(cases: list[Path]) -> dict[str, dict[tuple, dict[int, float]]]:
    """name -> series labels -> {timestamp_ms: value}"""
    fams: dict[str, dict[tuple, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for case in cases:
        for path in sorted((case / "metrics").rglob("*")):
            if not path.is_file() or not path.name.endswith((".prom", ".prom.gz")):
                continue
            opener = gzip.open if path.name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                for s in iter_samples(fh, PromFile()):
                    if s.timestamp_ms is None:
                        continue
                    labels = dict(s.labels)
                    labels[CASE_LABEL] = case.name
                    series = fams[s.name][tuple(sorted(labels.items()))]
                    series.setdefault(s.timestamp_ms, s.value)
    return fams


def render(fams: dict[str, dict[tuple, dict[int, float]]]) -> str:
    lines: list[str] = []
    for name in sorted(fams):
        lines.append(f"# TYPE {name} unknown")
        for labels, points in sorted(fams[name].items()):
            sel = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
            for ts in sorted(points):
                lines.append(f"{name}{{{sel}}} {_value(points[ts])} {ts / 1000:.3f}")
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    roots = [Path(a) for a in argv[1:]] or [REPO / "samples", REPO / "tests" / "heldout"]
    cases = case_dirs(roots)
    fams = collect(cases)
    out.write_text(render(fams), encoding="utf-8")
    n = sum(len(p) for f in fams.values() for p in f.values())
    print(f"{out}: {n} samples of {len(fams)} metrics from {len(cases)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

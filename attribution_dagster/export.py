"""Write one job as a case directory (docs/case-format.md): its context plus the evidence
that was read for it, so a hard case can be attached to a ticket or added to the tests.

Lines keep their text; a line from a back-end that stamps time outside the text (Loki,
pod logs with `timestamps=True`) gets that time as an ISO prefix, so the case replays with
the same times. Metric samples become Prometheus text with millisecond timestamps.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from attribution_dagster.connectors.timestamps import TimestampParser
from attribution_dagster.models import ExecutionContext, RawEvidence

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _file_name(stream: str, source: str) -> str:
    name = _UNSAFE.sub("_", Path(stream).name or source).strip("._") or "log"
    return name if "." in name else f"{name}.log"


def _label_value(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_case(out: Path, ctx: ExecutionContext, raw: RawEvidence) -> dict[str, int]:
    """Write `out/context.json`, `out/logs/<node>/<stream>`, `out/metrics/exported.prom`.
    Refuses to write into a directory that already holds a context.json."""
    out = Path(out)
    if (out / "context.json").exists():
        raise FileExistsError(f"{out} already holds a case (context.json); choose another DIR")
    out.mkdir(parents=True, exist_ok=True)
    context = ctx.model_dump(mode="json", exclude_none=True, exclude={"case_dir"})
    context = {k: v for k, v in context.items() if v not in ([], {})}
    (out / "context.json").write_text(json.dumps(context, indent=2) + "\n", encoding="utf-8")

    parser = TimestampParser(ctx.start, ctx.log_timezone)
    files: dict[Path, list[str]] = defaultdict(list)
    for rec in sorted(raw.records, key=lambda r: (r.node, r.stream, r.locator.render())):
        text = rec.text
        first = text.split("\n", 1)[0].encode("utf-8", "replace")
        own_time = parser.parse_line(first) is not None
        if rec.time is not None and rec.time_quality == "exact" and not own_time:
            text = f"{rec.time.isoformat()} {text}"
        files[out / "logs" / rec.node / _file_name(rec.stream, rec.source)].append(text)
    for path, lines in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    if raw.samples:
        (out / "metrics").mkdir(exist_ok=True)
        rows = []
        for s in sorted(raw.samples, key=lambda s: (s.name, s.node, s.time)):
            labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(s.labels.items()))
            ms = int(s.time.timestamp() * 1000)
            rows.append(f"{s.name}{{{labels}}} {s.value:g} {ms}")
        (out / "metrics" / "exported.prom").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return {"files": len(files), "lines": len(raw.records), "samples": len(raw.samples)}

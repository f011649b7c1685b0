"""Queries and bytes for one 64-node job against a REAL Prometheus: the connector's narrowed
queries vs naive ones.

Builds a synthetic cluster in a temp dir (64 job nodes + 16 other nodes, 8 GPUs and 8 IB
ports each, DCGM + node_exporter series at a 30 s scrape interval over the job's window;
three events: an XID 79, an uncorrectable-ECC increase and an IB link flap), backfills it
with `promtool tsdb create-blocks-from openmetrics`, starts `prometheus` on a free port
(own config, no scraping, retention 100y), measures, stops it and deletes the dir.

    python bench/prom_queries.py [--nodes 64] [--minutes 60] [--scrape 30]

Measured for the same job and window:

- connector: PrometheusClient.fetch_metrics (label discovery, one screening query per
  parser family for all nodes, raw samples of the series that changed, one presence query);
- naive raw, one query per family for all nodes: `{__name__=~"<family>", Hostname=~"..."}[W]`;
- naive raw, one query per node per family;
- naive query_range per family for all nodes at step max(15 s, W/500), no filtering.

Bytes are HTTP response bodies (what crosses the wire from Prometheus) and request bodies.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from attribution_dagster import pipeline  # noqa: E402
from attribution_dagster.connectors.prometheus.client import (  # noqa: E402
    PrometheusClient,
    PrometheusConfig,
)
from attribution_dagster.connectors.prometheus.promql import (  # noqa: E402
    duration,
    exact_regex,
    promql_string,
    step_seconds,
)
from attribution_dagster.core.context import ExecutionContext  # noqa: E402
from attribution_dagster.core.evidence import RawEvidence  # noqa: E402
from attribution_dagster.core.settings import AnalysisSettings  # noqa: E402

UTC = timezone.utc
START = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def write_fixture(path: Path, nodes: list[str], others: list[str], minutes: int, scrape: int,
                  lead: int, lag: int) -> tuple[int, int]:
    t0 = int(START.timestamp()) - lead
    t1 = int(START.timestamp()) + minutes * 60 + lag
    times = list(range(t0, t1 + 1, scrape))
    event = int(START.timestamp()) + minutes * 30  # halfway
    victim, ecc_node, ib_node = nodes[5], nodes[17], nodes[40]
    series = 0
    samples = 0
    with path.open("w") as out:
        def fam(name: str, typ: str, rows: list[tuple[str, callable]]) -> None:
            nonlocal series, samples
            out.write(f"# TYPE {name} {typ}\n")
            for labels, value_at in rows:
                series += 1
                for t in times:
                    out.write(f"{name}{{{labels}}} {value_at(t)} {t}\n")
                    samples += 1

        allnodes = nodes + others

        def gpu_rows(fn):
            return [(f'Hostname="{n}",gpu="{g}",UUID="GPU-{i:03d}-{g}",'
                     f'pci_bus_id="00000000:{g:02X}:00.0"', fn(n, g))
                    for i, n in enumerate(allnodes) for g in range(8)]

        def ib_rows(fn):
            return [(f'instance="{n}:9100",device="mlx5_{p}",port="1"', fn(n, p))
                    for n in allnodes for p in range(8)]

        fam("DCGM_FI_DEV_XID_ERRORS", "gauge", gpu_rows(
            lambda n, g: (lambda t: 79 if (n == victim and g == 3 and t >= event) else 0)))
        for name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"):
            fam(name, "gauge", gpu_rows(
                lambda n, g: (lambda t: 2 if (n == ecc_node and g == 1 and t >= event) else 0)))
        fam("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", gpu_rows(lambda n, g: (lambda t: 0)))
        for name in ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                     "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"):
            fam(name, "gauge", gpu_rows(lambda n, g: (lambda t: 3)))
        fam("node_infiniband_link_downed_total", "gauge", ib_rows(
            lambda n, p: (lambda t: 1 if (n == ib_node and p == 2 and t >= event) else 0)))
        fam("node_infiniband_state_id", "gauge", ib_rows(
            lambda n, p: (lambda t: 1 if p == 7 else (
                1 if (n == ib_node and p == 2 and event <= t < event + 90) else 4))))
        fam("node_infiniband_physical_state_id", "gauge", ib_rows(
            lambda n, p: (lambda t: 3 if p == 7 else 5)))
        out.write("# EOF\n")
    return series, samples


class CountingTransport(httpx.HTTPTransport):
    """Counts request body bytes the connector sends."""

    sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += len(request.read())
        return super().handle_request(request)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Meter:
    def __init__(self, url: str):
        self.http = httpx.Client(base_url=url, timeout=120)
        self.queries = self.sent = self.received = 0
        self.samples = 0

    def post(self, path: str, data: dict) -> dict:
        r = self.http.post(path, data=data)
        self.queries += 1
        self.sent += len(str(httpx.QueryParams(data)))
        self.received += len(r.content)
        body = r.json()
        assert body["status"] == "success", body
        for row in body["data"]["result"]:
            self.samples += len(row.get("values") or [])
        return body


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--others", type=int, default=16)
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--scrape", type=int, default=30)
    args = ap.parse_args()
    nodes = [f"gpu-{i:03d}" for i in range(args.nodes)]
    others = [f"gpu-{i:03d}" for i in range(args.nodes, args.nodes + args.others)]
    settings = AnalysisSettings()
    ctx = ExecutionContext(job_id="bench", scheduler="slurm", state="FAILED", start=START,
                           end=START + timedelta(minutes=args.minutes), nodes=nodes)
    window = settings.window(ctx)
    root = Path(tempfile.mkdtemp(prefix="prom-bench-"))
    proc = None
    try:
        t = time.monotonic()
        n_series, n_samples = write_fixture(
            root / "bench.om", nodes, others, args.minutes, args.scrape,
            int(settings.lead_seconds) + 600, int(settings.lag_seconds) + 600)
        subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q",
                        str(root / "bench.om"), str(root / "data")], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        with open(root / "prometheus.log", "w") as log:
            proc = subprocess.Popen(
                ["prometheus", f"--config.file={root / 'prometheus.yml'}",
                 f"--storage.tsdb.path={root / 'data'}", "--storage.tsdb.retention.time=100y",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        for _ in range(600):
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        setup = time.monotonic() - t
        print(f"fixture: {n_series} series, {n_samples} samples, {len(nodes)} job nodes "
              f"+ {len(others)} others, {args.minutes} min job, {args.scrape} s scrape; "
              f"backfill + start {setup:.1f} s")

        rows = []
        # the connector
        counting = CountingTransport()
        client = PrometheusClient(PrometheusConfig(url=url), transport=counting)
        t = time.monotonic()
        samples, cov = client.fetch_metrics(ctx, pipeline.catalog().metric_families(), window)
        dt = time.monotonic() - t
        obs = pipeline.normalize(RawEvidence(job_id="b", samples=samples), ctx)
        rows.append(("connector (screen per family + raw samples of changed series)",
                     cov.queries, counting.sent, cov.bytes, cov.samples, dt,
                     sorted({(o.kind, o.node) for o in obs})))

        fams = pipeline.catalog().metric_families()
        length = window.end.timestamp() - window.start.timestamp() + 1
        rng = duration(length)
        end = f"{window.end.timestamp():.3f}"

        def key_for(names):
            return "instance" if names[0].startswith("node_") else "Hostname"

        def node_matcher(key, names_):
            rx = exact_regex(names_)
            return f"{key}=~{promql_string(f'(?:{rx})(?::[0-9]+)?' if key == 'instance' else rx)}"

        def naive(label, per_node):
            m = Meter(url)
            t = time.monotonic()
            all_samples = []
            for f in fams:
                key = key_for(f.names)
                for group in ([[n] for n in nodes] if per_node else [nodes]):
                    sel = (f"{{__name__=~{promql_string(exact_regex(f.names))},"
                           f"{node_matcher(key, group)}}}[{rng}]")
                    body = m.post("/api/v1/query", {"query": sel, "time": end})
                    all_samples.append(body)
            rows.append((label, m.queries, m.sent, m.received, m.samples,
                         time.monotonic() - t, None))

        naive("naive raw, one query per family, all series", per_node=False)
        naive("naive raw, one query per node per family", per_node=True)
        m = Meter(url)
        t = time.monotonic()
        step = step_seconds(length)
        for f in fams:
            key = key_for(f.names)
            sel = f"{{__name__=~{promql_string(exact_regex(f.names))},{node_matcher(key, nodes)}}}"
            m.post("/api/v1/query_range", {
                "query": sel, "start": f"{window.start.timestamp():.3f}", "end": end,
                "step": f"{step:g}"})
        rows.append((f"naive query_range per family, step {step:g}s, unfiltered", m.queries,
                     m.sent, m.received, m.samples, time.monotonic() - t, None))

        print()
        print("| approach | queries | request bytes | response bytes | samples returned | time |")
        print("|---|---:|---:|---:|---:|---:|")
        for label, q, sent, received, n, dt, _ in rows:
            print(f"| {label} | {q} | {sent:,} | {received:,} | {n:,} | {dt:.2f} s |")
        print()
        print("connector observations:", rows[0][6])
        print("connector coverage:", cov.status, f"nodes_read={len(cov.nodes_read)}",
              f"nodes_missing={len(cov.nodes_missing)}", f"errors={cov.errors}")
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A repeated fact is one fact (issue 16): counts, first and last time and locator."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from attribution_dagster.core.evidence import RawEvidence, RawRecord
from attribution_dagster.core.formats.scan import FOLD_AFTER, FileScanner, ScanSpec
from attribution_dagster.core.locators import FileLine
from attribution_dagster.pipeline import analyze_case, catalog

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
XID = "kernel: [{up}] NVRM: Xid (PCI:0000:91:00): 95, pid=7062, Uncontained: LTC TAG (0x2,0x0)."


def _spec(fold: bool) -> ScanSpec:
    return ScanSpec(
        literals=("NVRM: Xid",),
        context_after=(0,),
        window_start=T0 - timedelta(hours=1),
        window_end=T0 + timedelta(hours=1),
        reference=T0,
        fold_repeats=fold,
    )


def _storm(n: int) -> bytes:
    lines = [b"Nov  2 09:59:59 node-a kernel: boot"]
    for k in range(n):
        t = T0 + timedelta(seconds=k)
        stamp = f"Nov  2 {t:%H:%M:%S}"
        lines.append(f"{stamp} node-a {XID.format(up=f'{612000 + k}.{k:06d}')}".encode())
        lines.append(f"{stamp} node-a kernel: unrelated {k}".encode())
    return b"\n".join(lines) + b"\n"


def test_scanner_folds_lines_that_differ_only_in_their_stamps() -> None:
    n = FOLD_AFTER + 50
    res = FileScanner(_spec(True)).scan_bytes(_storm(n))
    # the first FOLD_AFTER lines are kept as themselves, the rest fold into the last of them
    assert len(res.records) == FOLD_AFTER
    lineno, t, quality, _ = res.records[-1]
    k = FOLD_AFTER - 1
    assert (lineno, t, quality) == (2 + 2 * k, T0 + timedelta(seconds=k), "exact")
    count, last, t_last, text_last = res.repeats[lineno]
    assert (count, last, t_last) == (51, 2 + 2 * (n - 1), T0 + timedelta(seconds=n - 1))
    assert f"[{612000 + n - 1}." in text_last
    # without folding every line is a record (what the unit tests of the scanner read)
    assert len(FileScanner(_spec(False)).scan_bytes(_storm(n)).records) == n


def test_normalizer_folds_identical_facts_first_and_last_kept() -> None:
    from attribution_dagster.rules.parsers import _example_ctx

    ctx = _example_ctx(["node-a", "node-b"])
    recs = []
    for k, ptr in enumerate(["0x55d3c2a0", "0x7f00aa10", "0x6612bb00"]):
        recs.append(
            RawRecord(
                source="files",
                node="node-a",
                locator=FileLine(path="logs/node-a/app.log", line=10 + k * 100),
                time=T0 + timedelta(minutes=k),
                text=f"node-b:1123:1200 [3] NCCL INFO comm {ptr} rank 11 nRanks 16 nNodes 2 "
                "localRanks 8 localRank 3 MNNVL 0 - Init COMPLETE",
            )
        )
    # the same fact seen again later, already folded by a scanner (count 4)
    recs.append(
        RawRecord(
            source="files",
            node="node-a",
            locator=FileLine(path="logs/node-a/app.log", line=500),
            time=T0 + timedelta(minutes=5),
            text="node-b:1123:1200 [3] NCCL INFO comm 0x1 rank 11 nRanks 16 nNodes 2 localRank 3",
            count=4,
            time_last=T0 + timedelta(minutes=9),
            locator_last=FileLine(path="logs/node-a/app.log", line=900),
        )
    )
    obs = catalog().normalize(RawEvidence(job_id="j", records=recs), ctx)
    addr = [o for o in obs if o.kind == "node_address"]
    assert len(addr) == 1
    o = addr[0]
    assert o.node == "node-b" and o.attrs["rank"] == 11 and o.count == 7
    assert o.time == T0 and o.locator.render() == "logs/node-a/app.log:10"
    assert o.time_last == T0 + timedelta(minutes=9)
    assert o.locator_last is not None and o.locator_last.render() == "logs/node-a/app.log:900"


def test_storm_is_one_chain_link_with_its_count(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
    from generate import gen_xid_storm

    case = gen_xid_storm(tmp_path / "case", scale=0.0005)  # 400 XID lines on node-005
    res = analyze_case(case)
    assert res.category == "gpu.memory" and res.suspect_nodes == ["node-005"]
    root = [lk for lk in res.symptom_chain if lk.role == "root_cause" and lk.kind == "xid"]
    assert len(root) == 1 and root[0].count == 400
    ev = root[0].evidence
    assert ev.count == 400 and ev.locator_last is not None
    first = int(ev.locator.rsplit(":", 1)[1])
    last = int(ev.locator_last.rsplit(":", 1)[1])
    assert last == first + 399 and ev.time_last is not None and ev.time_last > ev.time

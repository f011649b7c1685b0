"""The parser catalog documents itself: every example in parsers.yaml is replayed here, plus
targeted tests for the traps (Fatal vs Nonfatal, Non-Fatal AER, XID 154 action, NCCL INFO
chatter, host naming, metric change detection)."""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample, RawEvidence, RawRecord
from attribution_dagster.core.locators import FileLine, QueryAt
from attribution_dagster.rules.decoders import DECODERS
from attribution_dagster.rules.decoders.application import classify_exception
from attribution_dagster.rules.docs import parsers_markdown
from attribution_dagster.rules.parsers import (
    CatalogError,
    ExampleSpec,
    load_catalog,
)
from attribution_dagster.rules.vocabulary import vocabulary

CAT = load_catalog()
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=timezone.utc)
CTX = ExecutionContext(
    job_id="42",
    scheduler="slurm",
    state="FAILED",
    start=T0,
    end=T0 + timedelta(hours=1),
    nodes=["node-a", "node-b", "node-c"],
)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "parsers.md"

EXAMPLES = [
    pytest.param(p.spec.id, i, ex, id=f"{p.spec.id}-{i}")
    for p in CAT.parsers
    for i, ex in enumerate(p.spec.examples)
]


def rec(
    text: str, node: str = "node-a", t: datetime | None = T0, loc: str = "logs/x:1"
) -> RawRecord:
    return RawRecord(source="files", node=node, locator=loc, time=t, text=text)


def parse(text: str, node: str = "node-a", ctx: ExecutionContext | None = CTX):
    return CAT.parse_record(rec(text, node), ctx)


def one(text: str, kind: str, **kw):
    obs = [o for o in parse(text, **kw) if o.kind == kind]
    assert len(obs) == 1, (text, [o.kind for o in parse(text, **kw)])
    return obs[0]


# --- the catalog itself ------------------------------------------------------------------------


@pytest.mark.parametrize("parser_id,index,ex", EXAMPLES)
def test_catalog_example(parser_id: str, index: int, ex: ExampleSpec) -> None:
    obs = CAT.example_observations(ex, parser_id)
    if ex.expect is None:
        assert obs == [], f"{parser_id} must not fire on {ex.line!r}"
        return
    assert len(obs) == 1, f"{parser_id} did not match {ex.line!r}"
    o = obs[0]
    spec = next(p.spec for p in CAT.parsers if p.spec.id == parser_id)
    assert o.kind == spec.kind
    for key, want in ex.expect.items():
        if key == "attrs":
            for akey, aval in want.items():
                assert akey in o.attrs, f"{parser_id}: attrs.{akey} missing in {o.attrs}"
                assert o.attrs[akey] == aval, f"{parser_id}: attrs.{akey}={o.attrs[akey]!r}"
        else:
            assert getattr(o, key) == want, f"{parser_id}: {key}={getattr(o, key)!r}"


def test_catalog_is_consistent() -> None:
    assert len(CAT.parsers) >= 30
    for p in CAT.parsers:
        assert p.spec.kind in vocabulary().kinds
        assert p.spec.examples, p.spec.id
        assert any(ex.expect is not None for ex in p.spec.examples), p.spec.id
        assert p.spec.decoder is None or p.spec.decoder in DECODERS
    for m in CAT.metric_specs:
        assert m.kind in vocabulary().kinds


def test_every_matching_example_contains_an_anchor_of_its_parser() -> None:
    """The scanner only hands over anchored lines: a regex hit without an anchor is lost."""
    for p in CAT.parsers:
        lits = [a.literal for a in p.spec.anchors]
        for ex in p.spec.examples:
            if p.rx.search(ex.line):
                assert any(lit in ex.line for lit in lits), (p.spec.id, ex.line)


def test_anchors_are_selective_literals() -> None:
    anchors = CAT.anchors()
    lits = [a.literal for a in anchors]
    assert len(lits) == len(set(lits))
    too_broad = {"NCCL", "error", "Error", "fail", "failed", "Xid", "Watchdog", "timeout", "Link"}
    assert not too_broad & set(lits)
    assert all(len(lit) >= 3 for lit in lits)
    assert "NCCL WARN" in lits and "NCCL INFO" not in lits
    child = [a for a in anchors if a.literal == "ChildFailedError"]
    assert child and child[0].context_after > 10
    # used sparingly: torchrun's summary block, a pretty-printed Kubernetes Event item and
    # driver messages split over NVRM lines, torchfrtrace's missing-ranks block, Fabric
    # Manager's GPU NVL fatal block
    event = [a for a in anchors if a.literal == '"eventTime"']
    assert event and event[0].context_after >= 30
    assert {a.literal for a in anchors if a.context_after} == {
        "ChildFailedError",
        '"eventTime"',
        "NVRM: The NVIDIA GPU",
        "Not all ranks joining collective",
        "GPU NVL Fatal error",
    }
    # progress literals are never prefilter hits (they match most lines of a training log)
    assert not {"loss=", "loss: ", "it/s]"} & set(lits)
    assert {"loss=", "it/s]"} <= {a.literal for a in CAT.anchors(last_only=True) if a.last_only}


def test_noise_lines_produce_nothing() -> None:
    assert CAT.noise
    for line in CAT.noise:
        assert parse(line) == [], line


def test_nccl_info_is_chatter() -> None:
    for line in [
        "node-a:2212:2290 [1] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7",
        "node-a:2212:2290 [1] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
        "node-a:2212:2290 [1] NCCL INFO comm 0x55 rank 1 nranks 16 cudaDev 1 busId 1b000 - Init"
        " COMPLETE",
    ]:
        # no event; the init line only tells which host runs which rank (engine bookkeeping)
        assert [o.kind for o in parse(line)] in ([], ["node_address"])


# --- XID -------------------------------------------------------------------------------------


def test_xid_table_covers_field_facts_codes() -> None:
    codes = [8, 13, 31, 32, 43, 45, 46, 48, 62, 63, 64, 69, 74, 79, 92, 94, 95, 109, 119, 120]
    codes += [121, 136, 137, 140, *range(143, 151), *range(154, 159), *range(162, 171)]
    for code in codes:
        assert code in vocabulary().xids, code
        o = one(f"NVRM: Xid (PCI:0000:3b:00): {code}, pid=1, name=python3, something", "xid")
        assert o.code == code and o.attrs["mnemonic"] == vocabulary().xids[code].mnemonic
    o = one("NVRM: Xid (PCI:0000:3b:00): 999, mystery", "xid")
    assert o.attrs["mnemonic"] == "UNKNOWN" and o.code == 999


@pytest.mark.parametrize("code", range(144, 151))
def test_nvlink5_fatal_and_nonfatal_are_read_from_the_line(code: int) -> None:
    fatal = one(
        f"NVRM: Xid (PCI:0008:01:00): {code}, SOME_EVT Fatal XC0 i0 Link 03 (0x1 0x0)", "xid"
    )
    assert fatal.attrs["fatal"] is True and fatal.attrs["link"] == 3 and fatal.port == "link 3"
    nonfatal = one(
        f"NVRM: Xid (PCI:0008:01:00): {code}, SOME_EVT Nonfatal XC0 i0 Link 03 (0x1)", "xid"
    )
    assert nonfatal.attrs["fatal"] is False
    assert nonfatal.attrs["event"] == "SOME_EVT"


def test_xid_silent_on_fatality_is_none() -> None:
    o = one(
        "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the"
        " bus.",
        "xid",
    )
    assert o.attrs["fatal"] is None and "process" not in o.attrs


def test_xid_154_action_numeric_only_uses_nvml_table() -> None:
    o = one("NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 to 0x2", "xid")
    assert o.attrs["action"] == "Node Reboot" and o.attrs["action_code"] == 2
    o = one(
        "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1"
        " (GPU Reset)",
        "xid",
    )
    assert o.attrs["action"] == "GPU Reset"


def test_xid_13_gpc_tpc() -> None:
    o = one(
        "NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1): Out Of"
        " Range Address",
        "xid",
    )
    assert (o.attrs["gpc"], o.attrs["tpc"], o.attrs["detail"]) == (0, 1, "Out Of Range Address")


def test_xid_with_syslog_prefix_and_dcgm_style_pci() -> None:
    o = one(
        "Nov  2 10:03:11 node-b kernel: [12.3] NVRM: Xid (PCI:00000000:91:00): 48, pid=3, DBE",
        "xid",
    )
    assert o.pci == "0000:91:00" and o.code == 48


def test_xid_line_is_not_also_gpu_lost() -> None:
    kinds = [
        o.kind
        for o in parse(
            "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off"
            " the bus."
        )
    ]
    assert kinds == ["xid"]
    assert (
        one("NVRM: GPU 0000:91:00.0: GPU has fallen off the bus.", "gpu_lost").pci == "0000:91:00"
    )


# --- AER -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line,severity",
    [
        (
            "pcieport 0000:00:03.1: AER: Uncorrected (Non-Fatal) error received: 0000:02:00.0",
            "nonfatal",
        ),
        ("pcieport 0000:00:03.1: AER: Uncorrected (Fatal) error received: 0000:02:00.0", "fatal"),
        ("pcieport 0000:00:03.1: AER: Corrected error received: 0000:02:00.0", "corrected"),
        (
            "pcieport 0000:00:03.1: AER: Multiple Corrected error received: 0000:02:00.0",
            "corrected",
        ),
        (
            "pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrected (Non-Fatal),"
            " type=Transaction Layer",
            "nonfatal",
        ),
        (
            "pcieport 0000:00:03.1: PCIe Bus Error: severity=Uncorrected (Fatal),"
            " type=Inaccessible",
            "fatal",
        ),
        (
            "pcieport 0000:00:03.1: AER: Correctable error message received from 0000:02:00.0",
            "corrected",
        ),
    ],
)
def test_aer_severity(line: str, severity: str) -> None:
    o = one(line, "pcie_aer")
    assert o.attrs["severity"] == severity
    assert o.pci == "0000:00:03.1"


# --- NCCL / watchdog ---------------------------------------------------------------------------


def test_nccl_specific_kinds_win_over_generic_warn() -> None:
    line = (
        "node-a:1:2 [3] NCCL WARN NET/IB : Got completion from peer 10.0.0.9<1> with error 12,"
        " opcode 0, len 0, vendor err 129 (Recv)"
    )
    kinds = [o.kind for o in parse(line)]
    assert kinds == ["ib_completion_error"]
    assert [o.kind for o in parse("node-a:1:2 [3] NCCL WARN some new thing")] == ["nccl_warn"]
    assert [o.kind for o in parse("node-a:1:2 [3] NCCL WARN Cuda failure 'out of memory'")] != []


def test_ib_completion_new_format_with_gids() -> None:
    o = one(
        "node-b:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer"
        " 10.1.2.3<5000> with status=12 opcode=1 len=4096 vendor err 129 (Send) localGid fe80::1"
        " remoteGids fe80::2",
        "ib_completion_error",
    )
    assert (o.attrs["status"], o.attrs["status_name"], o.attrs["opcode"]) == (
        12,
        "retry_exceeded",
        1,
    )
    assert o.node == "node-b" and o.peer == "10.1.2.3" and o.gpu == 0


def test_nccl_host_prefix_outside_job_keeps_record_node() -> None:
    o = one("gpu-201:9981:10021 [2] NCCL WARN something odd", "nccl_warn")
    assert o.node == "node-a" and "logged_on" not in o.attrs
    assert o.attrs["host"] == "gpu-201"


def test_nccl_origin_prefix_moves_every_observation_of_the_line() -> None:
    """The ECC observation of an NCCL WARN line goes where the line was emitted, with its GPU;
    a host outside the job, or no NCCL prefix, leaves the record's node."""
    ecc_text = "Cuda failure 'uncorrectable ECC error encountered'"
    line = f"node-b:2211409:2213001 [5] include/alloc.h:193 NCCL WARN {ecc_text}"
    obs = {o.kind: o for o in parse(line)}
    assert {"gpu_ecc_uncorrectable", "nccl_warn"} <= set(obs)
    ecc = obs["gpu_ecc_uncorrectable"]
    assert (ecc.node, ecc.gpu, ecc.attrs["logged_on"]) == ("node-b", 5, "node-a")
    stamped = f"2024-05-11 14:10:52.227 node-c:2657296:2658232 [0] NCCL WARN {ecc_text}"
    assert one(stamped, "gpu_ecc_uncorrectable").node == "node-c"
    foreign = f"gpu-201:9981:10021 [2] NCCL WARN {ecc_text}"
    assert one(foreign, "gpu_ecc_uncorrectable").node == "node-a"
    plain = one(
        "RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu_ecc_uncorrectable"
    )
    assert plain.node == "node-a" and plain.gpu is None


def test_host_less_echo_of_a_host_named_line_follows_it() -> None:
    """In an aggregated file, the rank's `Last error: Cuda failure '...'` repeats the NCCL WARN
    that named node-b: same parser, same time, a few lines apart -> node-b. Far away, at another
    time, or with two hosts named nearby, it stays on the file's node."""
    t1 = T0 + timedelta(minutes=5)

    def ecc_nodes(lines: list[tuple[int, datetime, str]]) -> list[str]:
        raw = RawEvidence(
            job_id="42",
            records=[
                RawRecord(
                    source="files", node="node-a", time=t, text=text,
                    locator=FileLine(path="logs/node-a/slurm-42.out", line=n),
                )  # fmt: skip
                for n, t, text in lines
            ],
        )
        obs = CAT.normalize(raw, CTX)
        return [o.node for o in obs if o.kind == "gpu_ecc_uncorrectable"]

    ecc_text = "Cuda failure 'uncorrectable ECC error encountered'"
    warn = f"node-b:2211409:2213001 [5] include/alloc.h:193 NCCL WARN {ecc_text}"
    echo = f"[rank21]: {ecc_text}"
    assert ecc_nodes([(4, T0, warn), (9, T0, echo)]) == ["node-b", "node-b"]
    assert sorted(ecc_nodes([(4, T0, warn), (90, T0, echo)])) == ["node-a", "node-b"]
    assert sorted(ecc_nodes([(4, T0, warn), (9, t1, echo)])) == ["node-a", "node-b"]
    other = warn.replace("node-b:", "node-c:")
    got = ecc_nodes([(4, T0, warn), (5, T0, other), (9, T0, echo)])
    assert sorted(got) == ["node-a", "node-b", "node-c"]


# --- launchers and host naming -------------------------------------------------------------------


def test_srun_host_naming() -> None:
    o = one("srun: error: node-b: task 1: Exited with exit code 1", "process_exit", node="node-a")
    assert (o.node, o.attrs["logged_on"], o.code) == ("node-b", "node-a", 1)
    same = one(
        "srun: error: node-a: task 0: Exited with exit code 1", "process_exit", node="node-a"
    )
    assert same.node == "node-a" and "logged_on" not in same.attrs
    no_ctx = CAT.parse_record(rec("srun: error: node-b: task 1: Exited with exit code 1"), None)
    assert no_ctx[0].node == "node-a"


def test_srun_node_failure_names_node() -> None:
    o = one("srun: error: Node failure on node-c", "node_unreachable", node="node-a")
    assert o.node == "node-c"


def test_torchrun_fqdn_host_matches_short_node_name() -> None:
    ctx = CTX.model_copy(update={"nodes": ["n20", "n21"]})
    text = "\n".join(
        [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
            "Root Cause (first observed failure):",
            "[0]:",
            "  host      : n21.cluster",
            "  rank      : 9 (local_rank: 1)",
            "  exitcode  : -6 (pid: 1246013)",
            "  traceback : Signal 6 (SIGABRT) received by PID 1246013",
        ]
    )
    o = [x for x in CAT.parse_record(rec(text, node="n20"), ctx) if x.kind == "child_failed"][0]
    assert o.node == "n21" and o.attrs["logged_on"] == "n20"
    assert o.attrs["signal_name"] == "SIGABRT" and o.code == -6 and o.attrs["rank"] == 9


def test_child_failed_without_block_still_reports() -> None:
    o = one("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", "child_failed")
    assert o.node == "node-a" and "exit_code" not in o.attrs


def test_continuation_lines_do_not_feed_single_line_parsers() -> None:
    text = (
        "some ChildFailedError mention\nNVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus."
    )
    assert [o.kind for o in parse(text)] == []


def test_slurm_cancel_reasons() -> None:
    for due, reason in [
        ("DUE TO TIME LIMIT", "time_limit"),
        ("DUE TO PREEMPTION", "preemption"),
        ("DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS", "node_failure"),
        ("DUE TO JOB REQUEUE", "requeue"),
    ]:
        line = f"slurmstepd: error: *** JOB 7 ON node-a CANCELLED AT 2026-11-02T10:40:00 {due} ***"
        assert one(line, "slurm_cancelled").attrs["reason"] == reason
    plain = one(
        "slurmstepd: error: *** STEP 7.0 ON node-b CANCELLED AT 2026-11-02T10:40:00 ***",
        "slurm_cancelled",
    )
    assert plain.attrs["reason"] == "none" and plain.node == "node-b"


def test_slurm_cancel_time_written_in_the_line_replaces_an_inherited_time() -> None:
    line = "slurmstepd: error: *** JOB 7 ON node-a CANCELLED AT 2026-11-02T10:40:00 ***"
    r = RawRecord(
        source="files", node="node-a", locator="x:3", time=T0, time_quality="inherited", text=line
    )
    (o,) = CAT.parse_record(r, CTX)
    assert o.time == datetime(2026, 11, 2, 10, 40, tzinfo=timezone.utc)
    assert o.time_quality == "exact"
    berlin = CTX.model_copy(update={"log_timezone": "Europe/Berlin"})
    (o,) = CAT.parse_record(r, berlin)
    assert o.time == datetime(2026, 11, 2, 9, 40, tzinfo=timezone.utc)
    # a line with its own timestamp prefix keeps it: the prefix is what the file's clock said
    exact = r.model_copy(update={"time_quality": "exact"})
    (o,) = CAT.parse_record(exact, CTX)
    assert o.time == T0


# --- exceptions ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "exc,msg,family",
    [
        (
            "torch.distributed.DistBackendError",
            "NCCL error in: x.cpp:1, remote process exited",
            "nccl",
        ),
        ("RuntimeError", "NCCL communicator was aborted on rank 3", "nccl"),
        ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", "cuda_oom"),
        ("RuntimeError", "CUDA error: device-side assert triggered", "cuda"),
        ("cupy_backends.cuda.api.runtime.CUDARuntimeError", "cudaErrorNoDevice", "cuda"),
        (
            "RuntimeError",
            "CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle)`",
            "cuda",
        ),
        # a CUDA device named in an application bug is not a CUDA error
        (
            "RuntimeError",
            "Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:2 and cpu! (when checking argument for argument mat2 in method wrapper_CUDA_mm)",
            "app",
        ),
        ("AssertionError", "Torch not compiled with CUDA enabled", "app"),
        ("OSError", "[Errno 28] No space left on device", "io"),
        ("OSError", "[Errno 2] No such file or directory", "app"),
        ("IOError", "[Errno 5] Input/output error", "io"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", "", "child_failed"),
        ("KeyboardInterrupt", "", "signal"),
        ("ZeroDivisionError", "division by zero", "app"),
    ],
)
def test_exception_family(exc: str, msg: str, family: str) -> None:
    assert classify_exception(exc, msg) == family


def test_traceback_header_and_frames_give_nothing() -> None:
    for line in [
        "Traceback (most recent call last):",
        '  File "train.py", line 12, in <module>',
        "    raise ValueError('x')",
        "During handling of the above exception, another exception occurred:",
    ]:
        assert [o for o in parse(line) if o.kind == "traceback"] == []


def test_prefixed_traceback_lines() -> None:
    assert one("3: ValueError: bad shape", "traceback").attrs["message"] == "bad shape"
    assert one("[rank7]: AssertionError", "traceback").attrs["exc_type"] == "AssertionError"


def test_oom_traceback_yields_cuda_oom_and_traceback() -> None:
    obs = parse(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a"
        " total capacity of 79.1 GiB"
    )
    by = {o.kind: o for o in obs}
    assert set(by) == {"cuda_oom", "traceback"}
    assert by["cuda_oom"].gpu == 3 and by["traceback"].attrs["family"] == "cuda_oom"


def test_cuda_error_kinds_are_exclusive() -> None:
    assert {o.kind for o in parse("CUDA error: out of memory")} == {"cuda_oom"}
    assert {o.kind for o in parse("CUDA error: uncorrectable ECC error encountered")} == {
        "gpu_ecc_uncorrectable"
    }
    assert {
        o.kind
        for o in parse("CUDA error: uncorrectable NVLink error detected during the execution")
    } == {"nvlink_error"}


def test_host_oom_vs_cgroup_oom() -> None:
    assert {
        o.kind for o in parse("Out of memory: Killed process 22222 (python3) total-vm:1kB")
    } == {"host_oom_kill"}
    assert {
        o.kind for o in parse("Memory cgroup out of memory: Killed process 22222 (python3)")
    } == {"cgroup_oom"}


def test_disk_full_from_python_and_kernel() -> None:
    assert one("OSError: [Errno 28] No space left on device", "disk_full")
    assert one(
        "EXT4-fs warning (device sda1): ext4_dx_add_entry: Directory index full! No space left"
        " on device",
        "disk_full",
    )


# --- observation shape -------------------------------------------------------------------------


def test_observation_copies_provenance_and_trims_excerpt() -> None:
    long = "NVRM: Xid (PCI:0000:91:00): 79, " + "x" * 1000
    r = RawRecord(
        source="loki",
        node="node-c",
        locator=QueryAt(language="logql", query="{job=1}", at_ns=123),
        time=None,
        time_quality="unknown",
        text=long,
    )
    (o,) = CAT.parse_record(r, CTX)
    assert (o.source, str(o.locator), o.time, o.time_quality, o.parser) == (
        "loki",
        "{job=1} @ns:123",
        None,
        "unknown",
        "nvrm_xid",
    )
    assert len(o.excerpt) <= 300 and o.node == "node-c"


def test_normalize_sorts_dedupes_and_puts_unknown_times_last() -> None:
    x1 = rec(
        "NVRM: Xid (PCI:0000:91:00): 79, GPU has fallen off the bus.",
        "node-b",
        T0 + timedelta(seconds=5),
        "k:1",
    )
    x2 = rec("node-a:1:2 [0] NCCL WARN boom", "node-a", T0 + timedelta(seconds=1), "a:9")
    x3 = rec("ValueError: late", "node-a", None, "a:10")
    naive = RawRecord(
        source="files",
        node="node-c",
        locator="c:1",
        time=datetime(2026, 11, 2, 10, 0, 3),
        text="AssertionError",
    )
    raw = RawEvidence(job_id="42", records=[x1, x3, x2, x1, naive])
    obs = CAT.normalize(raw, CTX)
    assert [o.kind for o in obs] == ["nccl_warn", "traceback", "xid", "traceback"]
    assert obs[-1].time is None


# --- metrics ------------------------------------------------------------------------------------


def sample(name: str, value: float, sec: int, **labels: str) -> MetricSample:
    return MetricSample(
        source="files",
        node="node-a",
        locator=FileLine(path="metrics/dcgm.prom", line=sec),
        time=T0 + timedelta(seconds=sec),
        name=name,
        labels=labels,
        value=value,
    )


def test_dcgm_xid_gauge_change_detection() -> None:
    lab = {"gpu": "3", "Hostname": "node-b", "pci_bus_id": "00000000:91:00.0"}
    vals = [0, 0, 79, 79, 0, 79, 149, 149]
    samples = [sample("DCGM_FI_DEV_XID_ERRORS", v, i, **lab) for i, v in enumerate(vals)]
    obs = CAT.normalize_samples(list(reversed(samples)), CTX)  # order of input does not matter
    assert [(o.code, o.time) for o in obs] == [
        (79, T0 + timedelta(seconds=2)),
        (79, T0 + timedelta(seconds=5)),
        (149, T0 + timedelta(seconds=6)),
    ]
    o = obs[0]
    assert (o.kind, o.node, o.gpu, o.pci, o.attrs["origin"]) == (
        "xid",
        "node-b",
        3,
        "0000:91:00",
        "dcgm",
    )
    assert o.locator == FileLine(path="metrics/dcgm.prom", line=2)
    assert "DCGM_FI_DEV_XID_ERRORS{" in o.excerpt
    first = CAT.normalize_samples([sample("DCGM_FI_DEV_XID_ERRORS", 48, 0, gpu="0")], CTX)
    assert [x.code for x in first] == [48]


def test_separate_series_are_not_mixed() -> None:
    s = [
        sample("DCGM_FI_DEV_XID_ERRORS", 79, 0, gpu="0"),
        sample("DCGM_FI_DEV_XID_ERRORS", 79, 1, gpu="1"),
    ]
    assert sorted(o.gpu for o in CAT.normalize_samples(s, CTX)) == [0, 1]


def test_ecc_counters_and_sbe_ignored() -> None:
    s = [
        sample("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", v, i, gpu="2", instance="node-c:9400")
        for i, v in enumerate([0, 0, 2])
    ]
    s += [sample("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", v, i, gpu="2") for i, v in enumerate([0, 5, 90])]
    obs = CAT.normalize_samples(s, CTX)
    assert [(o.kind, o.node, o.attrs["delta"], o.attrs["origin"]) for o in obs] == [
        ("gpu_ecc_uncorrectable", "node-c", 2, "dcgm")
    ]
    rr = CAT.normalize_samples([sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", 1, 0, gpu="1")], CTX)
    assert [o.kind for o in rr] == ["gpu_ecc_uncorrectable"]
    assert (
        CAT.normalize_samples([sample("DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, 0, gpu="1")], CTX) == []
    )


def test_nvlink_counter_delta() -> None:
    s = [
        sample("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", v, i, gpu="0")
        for i, v in enumerate([10, 10, 17, 17])
    ]
    obs = CAT.normalize_samples(s, CTX)
    assert [(o.kind, o.attrs["delta"]) for o in obs] == [("nvlink_counter", 7)]


def test_ib_state_transitions_and_link_downed() -> None:
    lab = {"device": "mlx5_0", "port": "1", "node": "node-b"}
    s = [sample("node_infiniband_state_id", v, i, **lab) for i, v in enumerate([4, 4, 1, 1, 4])]
    obs = CAT.normalize_samples(s, CTX)
    assert [(o.kind, o.time) for o in obs] == [
        ("ib_link_down", T0 + timedelta(seconds=2)),
        ("ib_link_up", T0 + timedelta(seconds=4)),
    ]
    assert (
        obs[0].port == "mlx5_0/1" and obs[0].node == "node-b" and obs[0].attrs["origin"] == "metric"
    )
    phys = [sample("node_infiniband_physical_state_id", v, i, **lab) for i, v in enumerate([5, 3])]
    assert [o.kind for o in CAT.normalize_samples(phys, CTX)] == ["ib_link_down"]
    downed = [
        sample("node_infiniband_link_downed_total", v, i, **lab) for i, v in enumerate([1, 1, 2])
    ]
    assert [o.attrs["delta"] for o in CAT.normalize_samples(downed, CTX)] == [1]


def test_metrics_tolerate_nan_and_inf() -> None:
    """A MetricSample refuses NaN / inf (JSON would turn them into null across an asset
    boundary; sources drop them); the normalizer still tolerates one built unchecked."""
    with pytest.raises(ValueError):
        sample("DCGM_FI_DEV_XID_ERRORS", math.nan, 0, gpu="0")
    good = sample("DCGM_FI_DEV_XID_ERRORS", 79, 2, gpu="0")
    at = [T0, T0 + timedelta(seconds=1)]
    s = [
        MetricSample.model_construct(**{**dict(good), "value": v, "time": t})
        for t, v in zip(at, [math.nan, math.inf], strict=True)
    ] + [good]
    obs = CAT.normalize_samples(s, CTX)
    assert [o.code for o in obs][-1] == 79


# --- catalog loading and docs -------------------------------------------------------------------


def test_the_catalog_is_compiled_once_per_process() -> None:
    from attribution_dagster import pipeline
    from attribution_dagster.rules import catalog

    assert catalog.parsers() is catalog.parsers() is pipeline.catalog()
    assert catalog.engine() is catalog.engine() is pipeline.engine()
    assert catalog.parsers(catalog.CATALOG_PATH) is catalog.parsers()  # keyed by the file


def test_bad_catalog_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text(
        "parsers:\n  - id: x\n    kind: not_a_kind\n    anchors: [abcd]\n    regex: abcd\n"
        "    examples: [{line: abcd, expect: {}}]\n"
    )
    with pytest.raises(CatalogError, match="not_a_kind"):
        load_catalog(bad)
    bad.write_text(
        "parsers:\n  - id: x\n    kind: xid\n    anchors: [abcd]\n    regex: 'ab(?P<c>cd'\n"
        "    examples: [{line: abcd, expect: {}}]\n"
    )
    with pytest.raises(CatalogError, match="bad regex"):
        load_catalog(bad)


def test_docs_are_generated_from_catalog() -> None:
    md = parsers_markdown(CAT)
    for p in CAT.parsers:
        assert f"`{p.spec.id}`" in md
    for kind in vocabulary().kinds:
        assert f"`{kind}`" in md
    assert DOCS.exists(), (
        "run: attribution parsers --markdown > docs/parsers.md (make docs)"
    )
    assert DOCS.read_text(encoding="utf-8") == md, "docs/parsers.md is stale: regenerate it"


def test_parse_throughput_on_hit_lines() -> None:
    lines = [ex.line for p in CAT.parsers for ex in p.spec.examples] + list(CAT.noise)
    records = [rec(lines[i % len(lines)], loc=f"f:{i}") for i in range(20000)]
    t = time.perf_counter()
    n = sum(len(CAT.parse_record(r, CTX)) for r in records)
    rate = len(records) / (time.perf_counter() - t)
    assert n > 15000
    assert rate > 5000, f"{rate:.0f} lines/s"


def test_dcgm_device_label_is_not_a_port() -> None:
    s = sample("DCGM_FI_DEV_XID_ERRORS", 79, 0, gpu="3", device="nvidia3", Hostname="node-b")
    (o,) = CAT.normalize_samples([s], CTX)
    assert o.port is None and o.gpu == 3


def test_prefixed_torchrun_block_and_exception() -> None:
    pre = "2026-11-22T17:09:16.645994+00:00 node-a python3[279934]: "
    text = "\n".join(
        pre + ln
        for ln in [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "Root Cause (first observed failure):",
            "  host      : node-b",
            "  exitcode  : -9 (pid: 1)",
        ]
    )
    o = [x for x in CAT.parse_record(rec(text), CTX) if x.kind == "child_failed"][0]
    assert (o.node, o.code, o.attrs["signal_name"]) == ("node-b", -9, "SIGKILL")
    assert one("Nov  2 10:03:11 node-a python3[12]: KeyError: 'x'", "traceback").attrs[
        "exc_type"
    ] == ("KeyError")
    assert (
        one("[Mon Nov  2 10:03:11 2026] 3: [rank3]: ValueError: v", "traceback").attrs["message"]
        == "v"
    )


# --- FIELD-FACTS audit: lines whose facts were missing or misread -------------------------------


def test_watchdog_flags_are_true_for_the_phrase_the_line_holds() -> None:
    """`:bool` attrs are set by the phrase matching, not by the phrase spelling "true"."""
    fd = one(
        "42: [rank42]:[E224 19:02:08.100000000 ProcessGroupNCCL.cpp:2403] [PG ID 5 PG GUID 7563"
        "(TENSOR_MODEL_PARALLEL_GROUP) Rank 0] failure detected by watchdog at work sequence id: 1",
        "watchdog_failure",
    )
    assert fd.attrs["failure_detected"] is True
    assert "thread_terminated" not in fd.attrs and "process_down" not in fd.attrs
    down = one(
        "[Rank 9] To avoid data inconsistency, we are taking the entire process down.",
        "watchdog_failure",
    )
    assert down.attrs["process_down"] is True and "failure_detected" not in down.attrs


def test_pre_4_19_kernel_killed_process_line_is_a_host_oom_kill() -> None:
    o = one(
        "Nov  2 10:03:11 node-b kernel: Killed process 19636 (python3) total-vm:1460016kB, "
        "anon-rss:1414008kB, file-rss:4kB, shmem-rss:0kB",
        "host_oom_kill",
    )
    assert (o.attrs["pid"], o.attrs["process"]) == (19636, "python3")
    cg = "Memory cgroup out of memory: Killed process 3141 (python) total-vm:812340kB, anon-rss:1kB"
    assert [x.kind for x in parse(cg)] == ["cgroup_oom"]
    assert parse("INFO worker: Killed process 4242 (dataloader) after timeout") == []


def test_scsi_offline_disk_and_thermal_shutdown() -> None:
    io = one("kernel: sd 2:0:0:0: [sdc] rejecting I/O to offline device", "io_error")
    assert (io.attrs["what"], io.attrs["device"]) == ("offline_device", "sdc")
    hot = one(
        "kernel: thermal thermal_zone0: critical temperature reached (105 C), shutting down",
        "kernel_panic",
    )
    assert hot.attrs["what"] == "thermal_shutdown"
    assert parse("CPU3: Core temperature above threshold, cpu clock throttled") == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (
            "  Normal   Preempted  1m  kueue-admission  Preempted to accommodate a workload "
            "(UID: 5c1a, JobUID: 77e0) due to prioritization in the ClusterQueue",
            "preempted",
        ),
        (
            '{"type":"Preempted","status":"True","reason":"InClusterQueue","message":"x"}',
            "preempted",
        ),
        (
            '{"type":"Evicted","status":"True","reason":"PodsReadyTimeout",'
            '"message":"Exceeded the PodsReady timeout default/train-7b"}',
            "pods_ready_timeout",
        ),
    ],
)
def test_kueue_workload_preemption_and_pods_ready_eviction(line: str, reason: str) -> None:
    assert one(line, "k8s_evicted").attrs["reason"] == reason


def test_kueue_queue_names_alone_are_not_evictions() -> None:
    assert parse("workload default/train-7b admitted InClusterQueue gpu-cq") == []


METRIC_EXAMPLES = [
    pytest.param(m, i, ex, id=f"{m.id}-{i}")
    for m in CAT.metric_specs
    for i, ex in enumerate(m.examples)
]


@pytest.mark.parametrize("spec,index,ex", METRIC_EXAMPLES)
def test_metric_catalog_example(spec, index: int, ex) -> None:
    obs = CAT.metric_example_observations(spec, ex)
    assert len(obs) == len(ex.expect), [o.kind for o in obs]
    for o, want in zip(obs, ex.expect, strict=True):
        assert o.parser == spec.id
        for key, val in want.items():
            if key == "attrs":
                for akey, aval in val.items():
                    assert o.attrs.get(akey) == aval, (spec.id, akey, o.attrs)
            else:
                assert getattr(o, key) == val, (spec.id, key, getattr(o, key))

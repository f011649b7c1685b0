# ruff: noqa: E501  (real lines are kept whole)
"""Issue 17 item 1: lines pasted in public issue threads, end to end through a case on disk.

Each test writes a small case around one class of real line (the line itself is copied from
the thread named in the catalog example; the surrounding lines are modeled) and checks the
result the taxonomy asks for. The catalog examples replay the same lines parser by parser
(tests/test_parsers.py); these tests check what the rules make of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attribution_dagster.pipeline import analyze_case


def run(tmp_path: Path, files: dict[str, str], nodes: list[str], **ctx: Any) -> Any:
    context = {
        "job_id": "17",
        "scheduler": "slurm",
        "state": "FAILED",
        "exit_code": 1,
        "start": "2026-11-02T10:00:00Z",
        "end": "2026-11-02T11:00:00Z",
        "nodes": nodes,
        **ctx,
    }
    (tmp_path / "context.json").write_text(json.dumps(context))
    for name, text in files.items():
        path = tmp_path / "logs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return analyze_case(tmp_path)


def outcome(res: Any) -> tuple[str, str | None, list[str]]:
    return res.status, res.category, sorted(res.suspect_nodes)


TERMINATED = "2026-11-02T10:20:05Z job step ending\nsrun: error: {n}: task 1: Terminated\n"


# --- GPU faults printed without an XID ---------------------------------------------------


def test_nvml_driver_library_mismatch_is_gpu_driver_on_that_node(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "gpu-a/slurm.out": """
2026-11-02T10:20:01Z checking GPUs with nvidia-smi
Failed to initialize NVML: Driver/library version mismatch
2026-11-02T10:20:02Z nvidia-smi returned 18, exiting
srun: error: gpu-a: task 0: Exited with exit code 1
""",
            "gpu-b/slurm.out": TERMINATED.format(n="gpu-b"),
        },
        ["gpu-a", "gpu-b"],
    )
    assert outcome(res) == ("attributed", "gpu.driver", ["gpu-a"])


def test_slurmstepd_nvml_gpu_is_lost(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "gpu-a/slurm.out": """
2026-11-02 10:10:02 | INFO | Epoch 6/20 train_loss=0.4311
slurmstepd: error: NVML: Failed to get usage(15): GPU is lost
srun: error: gpu-a: task 0: Exited with exit code 1
"""
        },
        ["gpu-a"],
    )
    assert outcome(res) == ("attributed", "gpu.lost", ["gpu-a"])


def test_nvidia_smi_no_device_handle_unknown_error(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "gpu-a/health.log": """
2026-11-02T10:20:00Z nvidia-smi exit=15
Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error
""",
            "gpu-b/slurm.out": TERMINATED.format(n="gpu-b"),
        },
        ["gpu-a", "gpu-b"],
    )
    assert outcome(res) == ("attributed", "gpu.lost", ["gpu-a"])


def test_cuda_uncorrectable_ecc(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "dgk713/slurm.out": """
2026-11-02T10:20:00Z Epoch 3 step 1200
RuntimeError: CUDA error: uncorrectable ECC error encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
"""
        },
        ["dgk713"],
    )
    assert outcome(res) == ("attributed", "gpu.memory", ["dgk713"])


def test_plain_fallen_off_the_bus_and_the_driver_reprobe_are_one_fault(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "gpu-a/kern.log": """
2026-11-02T10:20:00Z gpu-a kernel: NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.
2026-11-02T10:20:01Z gpu-a kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).
""",
            "gpu-b/slurm.out": TERMINATED.format(n="gpu-b"),
        },
        ["gpu-a", "gpu-b"],
    )
    assert outcome(res) == ("attributed", "gpu.lost", ["gpu-a"])


def test_probe_failure_on_another_node_stays_its_own_cause(tmp_path: Path) -> None:
    """The lost GPU explains the driver's re-probe on ITS node only."""
    res = run(
        tmp_path,
        {
            "gpu-a/kern.log": "2026-11-02T10:20:00Z gpu-a kernel: NVRM: GPU 0000:b3:00.0: GPU has fallen off the bus.\n",
            "gpu-b/kern.log": "2026-11-02T10:20:01Z gpu-b kernel: NVRM: The NVIDIA probe routine failed for 1 device(s).\n",
        },
        ["gpu-a", "gpu-b"],
    )
    assert res.status == "ambiguous"
    assert {c.category for c in res.candidates} == {"gpu.lost", "gpu.driver"}


# --- host OOM named on its node -----------------------------------------------------------


def test_srun_task_out_of_memory_names_the_host(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "gpu002/slurm-5187.out": """
2026-11-02T10:07:00Z stage 1/50
RuntimeError: DataLoader worker (pid 31877) is killed by signal: Killed.
srun: error: gpu001: task 0: Out Of Memory
srun: error: gpu002: task 1: Terminated
"""
        },
        ["gpu001", "gpu002"],
        state="OUT_OF_MEMORY",
    )
    assert outcome(res) == ("attributed", "node.host_oom", ["gpu001"])


def test_ray_memory_monitor_line_names_the_node_by_ip(tmp_path: Path) -> None:
    """The raylet's line reaches the driver's log on the head; the IP names the worker."""
    res = run(
        tmp_path,
        {
            "head/driver.log": """
2026-11-02T10:02:00Z Compute log probs: 76%
(raylet) [2026-11-02 10:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.95.143.76`
""",
            "worker/raylet.out": "2026-11-02T10:00:05Z (raylet) main.cc:180: Setting cluster ID\n",
        },
        ["head", "worker"],
        node_addresses={"head": ["10.95.143.75"], "worker": ["10.95.143.76"]},
    )
    assert outcome(res) == ("attributed", "node.host_oom", ["worker"])


def test_ray_out_of_memory_error_is_host_memory_not_gpu(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "ray-0/cache.log": """
2026-11-02T10:20:44Z caching: 41% (12288/29871 scenarios)
ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.
"""
        },
        ["ray-0"],
    )
    assert outcome(res) == ("attributed", "node.host_oom", ["ray-0"])


# --- downstream of the collective collapse ----------------------------------------------

WATCHDOG = (
    "[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=88213, OpType=BROADCAST, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) "
    "ran for 1800112 milliseconds before timing out."
)
OOM_1EB = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate more than 1EB memory"


def test_oom_after_the_collapse_in_the_same_file_is_a_symptom(tmp_path: Path) -> None:
    res = run(tmp_path, {"dgx-a07/train.err": f"{WATCHDOG}\n{OOM_1EB}\n"}, ["dgx-a07"])
    assert res.status == "unattributed"
    assert any("after the collective collapse" in n for n in res.notes)
    roles = {lk.kind: lk.role for lk in res.symptom_chain}
    assert roles.get("cuda_oom") == "symptom"


def test_oom_before_the_collapse_stays_the_cause(tmp_path: Path) -> None:
    oom = OOM_1EB.replace("more than 1EB memory", "336.00 MiB.")
    res = run(tmp_path, {"dgx-a07/train.err": f"{oom}\n{WATCHDOG}\n"}, ["dgx-a07"])
    assert outcome(res) == ("attributed", "app.gpu_oom", ["dgx-a07"])


def test_illegal_access_on_every_rank_after_the_timeout_is_a_symptom(tmp_path: Path) -> None:
    files = {
        f"n{i}/train.err": (
            f"2026-11-02T10:30:00Z [rank{i}]:[E ProcessGroupNCCL.cpp:632] [Rank {i}] {WATCHDOG.split('] ', 2)[2]}\n"
            f"2026-11-02T10:30:20Z [rank{i}]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
        )
        for i in range(2)
    }
    res = run(tmp_path, files, ["n0", "n1"])
    assert res.status == "unattributed"


def test_a_cause_that_cannot_be_ordered_against_the_collapse_stays_a_cause(
    tmp_path: Path,
) -> None:
    """Untimed lines in two files: which came first is unknown, so nothing is demoted."""
    res = run(
        tmp_path,
        {
            "n0/train.err": WATCHDOG + "\n",
            "n1/train.err": OOM_1EB.replace("more than 1EB", "2.00 GiB") + "\n",
        },
        ["n0", "n1"],
    )
    assert res.status == "attributed" and res.category == "app.gpu_oom"


# --- launcher prefixes name the line's origin --------------------------------------------


def _init_lines(nodes: dict[str, list[int]], world: int) -> dict[str, str]:
    """NCCL world-communicator init lines: which node runs which global rank."""
    out = {}
    for node, ranks in nodes.items():
        out[f"{node}/nccl.log"] = "".join(
            f"{node}:{1000 + r}:{2000 + r} [{r % 8}] NCCL INFO comm 0x55d3c2a0 rank {r} nRanks {world} nNodes 2 localRanks 2 localRank {r % 2} MNNVL 0\n"
            for r in ranks
        )
    return out


def test_ray_worker_prefix_moves_a_gpu_fault_to_the_worker(tmp_path: Path) -> None:
    """A GPU fault reported through the Ray head's driver log is the worker's."""
    res = run(
        tmp_path,
        {
            "head/driver.log": """
2026-11-02T10:20:00Z Episode [1/1]: 40%
(RayTrainWorker pid=4122, ip=10.0.3.7) RuntimeError: CUDA error: uncorrectable ECC error encountered
""",
            "worker/raylet.out": "2026-11-02T10:00:05Z (raylet) main.cc:180: Setting cluster ID\n",
        },
        ["head", "worker"],
        node_addresses={"head": ["10.0.3.6"], "worker": ["10.0.3.7"]},
    )
    assert outcome(res) == ("attributed", "gpu.memory", ["worker"])
    ecc = next(lk for lk in res.symptom_chain if lk.role == "root_cause")
    assert ecc.node == "worker"


def test_ray_prefix_mlx5_completion_error_is_a_symptom_on_the_worker(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "head/driver.log": "(RayWorkerWrapper pid=92234, ip=172.19.24.110) mlx5: host_unknown: got completion with error: [repeated 2x across cluster]\n",
        },
        ["head", "worker"],
        node_addresses={"worker": ["172.19.24.110"]},
    )
    links = [lk for lk in res.symptom_chain if lk.kind == "ib_completion_error"]
    assert links and links[0].node == "worker" and links[0].role == "symptom"


def test_torchrun_rank_prefix_follows_the_rank_map(tmp_path: Path) -> None:
    """One file gathers every rank's output; `[rank3]:` is node-b's (NCCL init lines)."""
    files = _init_lines({"node-a": [0, 1], "node-b": [2, 3]}, 4)
    files["node-a/train.log"] = """
2026-11-02T10:20:00Z step 100 loss 2.1
[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered
"""
    res = run(tmp_path, files, ["node-a", "node-b"])
    assert outcome(res) == ("attributed", "gpu.memory", ["node-b"])


def test_mpirun_rank_prefix_follows_the_rank_map(tmp_path: Path) -> None:
    files = _init_lines({"node-a": [0, 1], "node-b": [2, 3]}, 4)
    files["node-a/mpirun.out"] = """
2026-11-02T10:20:00Z step 100 loss 2.1
[1,2]<stderr>:RuntimeError: CUDA error: uncorrectable ECC error encountered
"""
    res = run(tmp_path, files, ["node-a", "node-b"])
    assert outcome(res) == ("attributed", "gpu.memory", ["node-b"])


def test_srun_label_around_a_rank_prefix_the_rank_wins(tmp_path: Path) -> None:
    files = _init_lines({"node-a": [0, 1], "node-b": [2, 3]}, 4)
    files["node-a/slurm-17.out"] = """
2026-11-02T10:20:00Z step 100 loss 2.1
0: [rank2]: RuntimeError: CUDA error: uncorrectable ECC error encountered
"""
    res = run(tmp_path, files, ["node-a", "node-b"])
    assert outcome(res) == ("attributed", "gpu.memory", ["node-b"])


def test_rank_prefix_without_a_rank_map_stays_on_the_file_node(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "node-a/train.log": "2026-11-02T10:20:00Z x\n[rank3]: RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
            "node-b/train.log": "2026-11-02T10:20:00Z x\n",
        },
        ["node-a", "node-b"],
    )
    assert outcome(res) == ("attributed", "gpu.memory", ["node-a"])


def test_torchrun_local_rank_prefix_names_no_other_node(tmp_path: Path) -> None:
    files = _init_lines({"node-a": [0, 1], "node-b": [2, 3]}, 4)
    files["node-a/train.log"] = (
        "2026-11-02T10:20:00Z x\n[default3]:RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
    )
    res = run(tmp_path, files, ["node-a", "node-b"])
    assert outcome(res) == ("attributed", "gpu.memory", ["node-a"])


def test_kubectl_pod_prefix_resolves_through_the_pods(tmp_path: Path) -> None:
    """A multi-pod log (`kubectl logs --prefix`) kept on one node: the pod names the node."""
    pods = [
        {"namespace": "train", "name": "job-worker-0", "node": "gpu-n1"},
        {"namespace": "train", "name": "job-worker-1", "node": "gpu-n2"},
    ]
    res = run(
        tmp_path,
        {
            "gpu-n1/pods.log": """
2026-11-02T10:20:00Z [pod/job-worker-0/pytorch] step 100 loss 2.1
[pod/job-worker-1/pytorch] RuntimeError: CUDA error: uncorrectable ECC error encountered
"""
        },
        ["gpu-n1", "gpu-n2"],
        scheduler="kueue",
        pods=pods,
    )
    assert outcome(res) == ("attributed", "gpu.memory", ["gpu-n2"])


def test_every_origin_example_is_read_and_stripped() -> None:
    """The origins table (parsers.yaml) and strip_prefix agree on every example line."""
    from attribution_dagster.rules.decoders import strip_prefix
    from attribution_dagster.rules.parsers import load_catalog

    cat = load_catalog()
    assert {o.id for o in cat.origin_specs} >= {
        "ray_process",
        "kubectl_prefix",
        "torchrun_rank",
        "torchrun_local",
        "mpirun_rank",
        "srun_label",
    }
    for spec in cat.origin_specs:
        for ex in spec.examples:
            assert cat.origin(ex.line) == ex.expect, (spec.id, ex.line)
            if ex.expect:
                rest = strip_prefix(ex.line)
                assert cat.origin(rest) == {} and len(rest) < len(ex.line), (spec.id, rest)


# --- XID 45 follows the XID it names ------------------------------------------------------

XID45 = "2026-11-02T10:20:01Z gpu-b kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n"
XID149 = "2026-11-02T10:20:00Z gpu-b kernel: NVRM: Xid (PCI:0000:dc:00): 149, NETIR_LINK_EVT  {fatal}   XC0 i0 Link 01 (0x021425c6 0x00000000)\n"


def _xid_case(tmp_path: Path, kern: str) -> Any:
    return run(
        tmp_path,
        {"gpu-b/kern.log": kern, "gpu-c/slurm.out": TERMINATED.format(n="gpu-c")},
        ["gpu-b", "gpu-c"],
        gpu_model="B200",
    )


def test_xid45_follows_a_present_fatal_xid149(tmp_path: Path) -> None:
    res = _xid_case(tmp_path, XID149.format(fatal="Fatal") + XID45)
    assert outcome(res) == ("attributed", "gpu.nvlink", ["gpu-b"])
    roots = [lk for lk in res.symptom_chain if lk.role == "root_cause"]
    assert any("45" in lk.summary for lk in roots)  # the 45 corroborates the 149


def test_xid45_follows_a_nonfatal_xid149_into_noise(tmp_path: Path) -> None:
    res = _xid_case(tmp_path, XID149.format(fatal="Nonfatal") + XID45)
    assert res.status == "unattributed"
    assert not [lk for lk in res.symptom_chain if lk.kind == "xid"]


def test_xid45_alone_stays_a_symptom(tmp_path: Path) -> None:
    res = _xid_case(tmp_path, XID45)
    assert res.status == "unattributed"
    assert [lk.role for lk in res.symptom_chain if lk.kind == "xid"] == ["symptom"]


# --- a line that fits two categories: rivals ----------------------------------------------


def test_cuda_unknown_error_alone_is_ambiguous_between_lost_gpu_and_driver(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "cn-229/log.run.1": """
2026-11-02T10:00:48Z RETURNN starting up
Using gpu device 2: NVIDIA GeForce GTX 1080 Ti
RuntimeError: CUDA error: unknown error
"""
        },
        ["cn-229"],
    )
    assert outcome(res) == ("ambiguous", None, ["cn-229"])
    assert {c.category for c in res.candidates} == {"gpu.lost", "gpu.driver"}


def test_cuda_unknown_error_yields_to_a_named_gpu_fault(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "cn-229/kern.log": "2026-11-02T10:00:40Z cn-229 kernel: NVRM: Xid (PCI:0000:3b:00): 119, pid=1582259, name=python, Timeout after 6s of waiting for RPC response from GPU1 GSP!\n",
            "cn-229/log.run.1": "2026-11-02T10:00:48Z step 10\nRuntimeError: CUDA error: unknown error\n",
        },
        ["cn-229"],
    )
    assert outcome(res) == ("attributed", "gpu.driver", ["cn-229"])


def test_cuda_error_46_is_ambiguous_between_the_gpu_and_the_application(tmp_path: Path) -> None:
    res = run(
        tmp_path,
        {
            "dgj304/slurm.out": """
2026-11-02T10:00:01Z => creating model 'resnet50'
THCudaCheck FAIL file=/pytorch/aten/src/THC/THCTensorRandom.cu line=25 error=46 : all CUDA-capable devices are busy or unavailable
srun: error: dgj304: task 0: Exited with exit code 1
"""
        },
        ["dgj304"],
    )
    assert outcome(res) == ("ambiguous", None, ["dgj304"])
    assert {c.category for c in res.candidates} == {"gpu.lost", "app.error"}


def test_cuda_unknown_error_after_the_collapse_is_a_symptom(tmp_path: Path) -> None:
    res = run(
        tmp_path, {"n0/train.err": f"{WATCHDOG}\nRuntimeError: CUDA error: unknown error\n"}, ["n0"]
    )
    assert res.status == "unattributed"


def test_rivals_are_checked_when_the_catalog_loads(tmp_path: Path) -> None:
    import pytest

    from attribution_dagster.rules.engine.rulebook import RulebookError, load_rulebook

    rule = """version: "t"
rules:
  - id: r
    description: d
    match: {kind: cuda_error}
    role: %s
    %s
    rivals: [%s]
    summary: s
    example: {kind: cuda_error}
"""
    for role, extra, rival in [
        ("symptom", "", "gpu.driver"),
        ("cause", "category: gpu.lost\n    weight: 50", "gpu.lost"),
        ("cause", "category: gpu.lost\n    weight: 50", "gpu.broken"),
    ]:
        path = tmp_path / "rules.yaml"
        path.write_text(rule % (role, extra, rival))
        with pytest.raises(RulebookError, match="rivals"):
            load_rulebook(path)

"""Application decoders: what a Python exception is about, and training progress lines.

An exception's family (nccl, cuda_oom, host_oom, cuda, io, object_store, signal, app) lets
rules tell an application bug from an infrastructure fault the application merely reported.
"""

from __future__ import annotations

import re

from attribution_dagster.rules.decoders.registry import Draft, decoder

_NOT_EXCEPTIONS = {"LustreError", "NVRM", "Error", "Exception"}
_NCCL_TEXT = re.compile(
    r"NCCL|nccl|communicator|[Ww]atchdog|DistBackendError|DistNetworkError|DistStoreError"
    r"|ProcessGroup|remote process exited|gloo"
)
_IO_ERRNO = re.compile(
    r"Errno (?:5|28|30|107|108|116|122)\b|Input/output error|No space left|Read-only file system"
    r"|Stale file handle|transport endpoint|Disk quota exceeded"
    # torch.save on a full / failing filesystem often says only this (no errno text)
    r"|PytorchStreamWriter failed writing file|unexpected pos \d+ vs \d+"
)
# A CUDA *error* (driver/runtime/library status), not a mere mention of a CUDA device: a
# device-mismatch bug ("found at least two devices, cuda:2 and cpu! ... wrapper_CUDA_mm") or
# "Torch not compiled with CUDA enabled" is the application's own error.
_CUDA_TEXT = re.compile(
    r"CUDA (?:driver |runtime )?error|cuda runtime error|CUDA_ERROR_|cudaError|Cuda failure"
    r"|cuBLAS error|CUBLAS_STATUS_|cuDNN error|CUDNN_STATUS_|AcceleratorError|CUDA kernel errors"
    r"|CUDA-capable device|CUDA call failed"
)
_CUDA_EXC = re.compile(r"cuda", re.IGNORECASE)  # CUDARuntimeError, CudaAPIError, ...
_OOM_TEXT = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUDA driver error: out of memory"
    r"|cuda runtime error \(2\) : out of memory|OutOfMemoryError"
    r"|RESOURCE_EXHAUSTED: Out of memory while trying to allocate"  # JAX / XLA on GPU
)

# Out of HOST memory, whatever the exception's name says: Ray's memory monitor kills a task when
# the node runs low on RAM and raises `ray.exceptions.OutOfMemoryError: Task was killed due to
# the node running low on memory.` (not a GPU OOM).
_HOST_OOM_EXC = re.compile(
    r"^ray\.exceptions\.OutOfMemoryError\b|node running low on memory|RayOutOfMemoryError"
)

# An S3-compatible object store (checkpoints, datasets) that did not answer: botocore's
# connection / timeout exceptions (`Read timeout on endpoint URL: "..."`, `Could not connect to
# the endpoint URL: "..."`) and a ClientError the server itself raised (503 SlowDown,
# ServiceUnavailable, InternalError, RequestTimeout). Credentials, permissions, a missing bucket
# or key are the job's own configuration: app.
_OBJECT_STORE_EXC = {
    "ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError", "ConnectionClosedError",
}  # fmt: skip
_OBJECT_STORE_SERVER = re.compile(
    r"\((?:SlowDown|ServiceUnavailable|InternalError|RequestTimeout|503)\)"
)


def _object_store(exc_type: str, short: str, message: str) -> bool:
    if not exc_type.startswith(("botocore.", "aiobotocore.")) and "endpoint URL" not in message:
        return False
    if short in _OBJECT_STORE_EXC:
        return True
    return short == "ClientError" and bool(_OBJECT_STORE_SERVER.search(message))


def classify_exception(exc_type: str, message: str) -> str:
    """nccl, host_oom, cuda_oom, cuda, io, object_store, signal, child_failed or app: what the
    exception is about."""
    short = exc_type.rsplit(".", 1)[-1]
    both = f"{exc_type} {message}"
    if short == "ChildFailedError":
        return "child_failed"
    if short in ("SignalException", "KeyboardInterrupt", "SystemExit"):
        return "signal"
    if _HOST_OOM_EXC.search(both):
        return "host_oom"
    if _OOM_TEXT.search(both) and not short.startswith("nccl"):
        return "cuda_oom"
    if short.startswith("nccl") or _NCCL_TEXT.search(both):
        return "nccl"
    if _CUDA_TEXT.search(both) or _CUDA_EXC.search(short):
        return "cuda"
    if _object_store(exc_type, short, message):
        return "object_store"
    if short in ("OSError", "IOError", "FileNotFoundError", "PermissionError", "BlockingIOError"):
        if _IO_ERRNO.search(message):
            return "io"
        return "app"
    if _IO_ERRNO.search(message) and short in ("RuntimeError", "ConnectionError"):
        return "io"
    return "app"


@decoder("exception", attrs=["exc_type", "message", "family", "errno"])
def decode_exception(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    exc = groups.get("exc") or ""
    short = exc.rsplit(".", 1)[-1]
    if short in _NOT_EXCEPTIONS:
        return False
    msg = (groups.get("msg") or "").strip()
    draft["attrs"]["exc_type"] = exc
    draft["attrs"]["message"] = msg[:240]
    draft["attrs"]["family"] = classify_exception(exc, msg)
    errno = re.search(r"\[Errno (\d+)\]", msg)
    if errno:
        draft["attrs"]["errno"] = int(errno.group(1))
    return True


_STEP = re.compile(
    r"iteration\s{0,12}(?P<it>\d{1,12})\s{0,4}/\s{0,12}(?P<tot>\d{1,12})"  # Megatron / NeMo
    r"|\b(?:global_)?[Ss]teps?\b[\s=:]{1,4}(?P<step>\d{1,12})"  # DeepSpeed, torchtitan, logging
    r"|\b(?P<tq>\d{1,12})/(?P<tqt>\d{1,12}) \[[\d:]{4,12}<"  # tqdm / Lightning counter
)
_LOSS = re.compile(
    r"(?:lm loss|train_loss|'loss'|\bloss)['\"]?(?:\s{0,2}[=:]\s{0,3}|\s{1,2}(?=-?\d))"
    r"(?P<loss>nan|inf|-?[\d.]+(?:[eE][+-]?\d+)?)",
    re.IGNORECASE,
)
_RATE = re.compile(
    r"(?P<rate>[\d.]{1,12})\s?(?P<unit>it/s|s/it)|(?:tokens/s|tps|samples/s(?:ec)?|"
    r"samples_per_second|TFLOPs)[\s=:'\"]{1,4}(?P<tput>[\d.,]{1,16})"
)


@decoder("progress", attrs=["step", "total", "loss", "throughput"])
def decode_progress(groups: dict[str, str | None], text: str, draft: Draft) -> bool:
    """A training progress line: step (iteration / step / tqdm counter), loss, throughput.
    Needs a step or a loss (a bare rate is not enough to say the job advanced)."""
    line = text.split("\n", 1)[0][-2000:]  # tqdm lines hold many \r updates: the last counts
    line = line.rsplit("\r", 1)[-1] if "\r" in line else line
    attrs = draft["attrs"]
    found = list(_STEP.finditer(line))
    m = found[-1] if found else None
    if m is not None:
        step = m.group("it") or m.group("step") or m.group("tq")
        total = m.group("tot") or m.group("tqt")
        attrs["step"] = int(step) if step else None
        if total:
            attrs["total"] = int(total)
    lm = _LOSS.search(line)
    if lm:
        try:
            attrs["loss"] = float(lm.group("loss"))
        except ValueError:
            attrs["loss"] = lm.group("loss")
    rm = _RATE.search(line)
    if rm:
        attrs["throughput"] = (rm.group("rate") or rm.group("tput") or "").replace(",", "")
    attrs = {k: v for k, v in attrs.items() if v is not None}
    draft["attrs"] = attrs
    return "step" in attrs or "loss" in attrs

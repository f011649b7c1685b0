"""Node log trees on shared storage (FilesSource), cluster-level sources, confinement, rotation
and the one node-name normalization (connectors/files/tree.py, case.py; core/hosts.py)."""

from __future__ import annotations

import gzip
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from attribution_dagster import pipeline
from attribution_dagster.connectors import parse_config
from attribution_dagster.connectors.base import LogSource, SourceError
from attribution_dagster.connectors.clusters import clusters_from
from attribution_dagster.connectors.files import tree as files_mod
from attribution_dagster.connectors.files.case import LocalFilesClient
from attribution_dagster.connectors.files.reader import match_nodes
from attribution_dagster.connectors.files.tree import FilesSource, FilesSourceConfig
from attribution_dagster.core.config import load_config
from attribution_dagster.core.context import ExecutionContext
from attribution_dagster.core.evidence import MetricSample, RawEvidence, RawRecord
from attribution_dagster.core.formats.promtext import sample_nodes
from attribution_dagster.core.formats.scan import FileScanner
from attribution_dagster.core.hosts import CLUSTER_NODE, NodeIndex, expand_hostlist, strip_port
from attribution_dagster.core.settings import AnalysisSettings, Window
from attribution_dagster.rules.parse_metrics import _node as metric_node
from attribution_dagster.rules.parsers import _resolve_host

UTC = timezone.utc
START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
END = datetime(2026, 11, 2, 10, 45, tzinfo=UTC)
WINDOW = Window(start=START - timedelta(minutes=2), end=END + timedelta(minutes=1))
ANCHORS = pipeline.catalog().anchors()
SAMPLES = Path(__file__).resolve().parents[3] / "samples"

XID_B = (
    b"Nov  2 10:03:11 cn-0411 kernel: NVRM: Xid (PCI:0000:91:00): 79, pid=1, "
    b"GPU has fallen off the bus.\n"
)
BORING = b"Nov  2 10:01:00 cn-0411 systemd[1]: Started Session 1 of User root.\n"


def ctx(nodes: list[str] | None = None, **kw: object) -> ExecutionContext:
    base: dict[str, object] = dict(
        job_id="4412",
        scheduler="slurm",
        cluster="atlas",
        state="FAILED",
        start=START,
        end=END,
        nodes=nodes or ["cn-0410", "cn-0411"],
    )
    base.update(kw)
    return ExecutionContext(**base)  # type: ignore[arg-type]


def write(path: Path, data: bytes, mtime: datetime | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime.timestamp(), mtime.timestamp()))
    return path


def source(root: Path, **kw: object) -> FilesSource:
    return FilesSourceConfig(root=str(root), **kw).client("atlas")  # type: ignore[arg-type]


def fetch(src: FilesSource, c: ExecutionContext | None = None):  # type: ignore[no-untyped-def]
    return src.fetch_logs(c or ctx(), ANCHORS, WINDOW).pair()


# --- configuration -------------------------------------------------------------------------


def test_config_is_registered_and_builds_a_log_source(tmp_path: Path) -> None:
    cfg = parse_config("logs", {"kind": "files", "root": str(tmp_path), "name": "shared"})
    assert isinstance(cfg, FilesSourceConfig) and cfg.source_name == "files:shared"
    client = cfg.client("atlas")
    assert isinstance(client, LogSource) and client.name == "files:shared"


@pytest.mark.parametrize(
    "block,message",
    [
        ({"paths": ["{host}/syslog"]}, "unknown placeholder {host}"),
        ({"paths": ["logs/{stdout}"]}, "stand alone"),
        ({"paths": ["/var/log/{node}/syslog"]}, "relative to root"),
        ({"paths": ["{node}/../../etc/passwd"]}, "relative to root"),
        ({"paths": ["common/*.log"]}, "cluster_paths"),
        ({"cluster_paths": ["{node}/syslog"]}, "names no node"),
        ({"cluster_paths": ["{stdout}"]}, "not a cluster-level file"),
    ],
)
def test_bad_templates_are_refused_with_a_reason(
    tmp_path: Path, block: dict[str, list[str]], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("{", r"\{").replace("}", r"\}")):
        parse_config("logs", {"kind": "files", "root": str(tmp_path), **block})


def test_missing_root_raises_source_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a readable directory"):
        fetch(source(tmp_path / "nope"))


# --- templates -----------------------------------------------------------------------------


def test_node_templates_globs_and_spellings(tmp_path: Path) -> None:
    """`{node}` finds the directory whatever its spelling (FQDN, upper case); other nodes'
    directories are never read; globs match rotated names."""
    write(tmp_path / "CN-0410.cluster.local/syslog", XID_B.replace(b"cn-0411", b"cn-0410"))
    write(tmp_path / "cn-0411/kern.log-20261102.gz", XID_B)
    write(tmp_path / "cn-0411/messages", XID_B)  # no template names it
    write(tmp_path / "cn-0999/syslog", XID_B.replace(b"cn-0411", b"cn-0999"))
    recs, cov = fetch(source(tmp_path, paths=["{node}/syslog*", "{node}/kern.log*"]))
    got = sorted((r.node, str(r.locator)) for r in recs)
    assert got == [
        ("cn-0410", f"{tmp_path}/CN-0410.cluster.local/syslog:1"),
        ("cn-0411", f"{tmp_path}/cn-0411/kern.log-20261102.gz:1"),
    ]
    assert cov.files == 2 and cov.nodes_read == ["cn-0410", "cn-0411"]
    assert cov.status == "ok" and cov.source == "files"


def test_job_templates_and_cluster_placeholder_go_to_the_batch_host(tmp_path: Path) -> None:
    """Lines of `{job_id}` files belong to the job's first node unless the parser names a
    host in the line (srun `error: <host>: task N`)."""
    out = (
        b"2026-11-02T10:40:00+00:00 srun: error: cn-0411: task 9: Exited with exit code 1\n"
        b"2026-11-02T10:40:01+00:00 RuntimeError: CUDA error: an illegal memory access\n"
    )
    write(tmp_path / "atlas/jobs/4412/slurm-4412.out", out)
    write(tmp_path / "atlas/jobs/4413/slurm-4413.out", out)  # another job: not read
    src = source(tmp_path, paths=["{cluster}/jobs/{job_id}/*.out"])
    recs, cov = fetch(src)
    assert {r.node for r in recs} == {"cn-0410"} and cov.files == 1
    assert all("/jobs/4412/" in str(r.locator) for r in recs)
    obs = pipeline.normalize(RawEvidence(job_id="4412", records=recs), ctx())
    by_kind = {o.kind: o for o in obs}
    assert by_kind["process_exit"].node == "cn-0411"
    assert by_kind["process_exit"].attrs["logged_on"] == "cn-0410"
    assert by_kind["cuda_error"].node == "cn-0410"


def test_a_file_matched_by_two_templates_is_read_once(tmp_path: Path) -> None:
    write(tmp_path / "cn-0411/syslog", XID_B)
    recs, cov = fetch(source(tmp_path, paths=["{node}/syslog*", "{node}/*"]))
    assert len(recs) == 1 and cov.files == 1


def test_matched_directory_is_read_whole(tmp_path: Path) -> None:
    write(tmp_path / "cn-0411/a/kern.log", XID_B)
    recs, _ = fetch(source(tmp_path, paths=["{node}"]))
    assert [str(r.locator) for r in recs] == [f"{tmp_path}/cn-0411/a/kern.log:1"]


def test_stdout_inside_root_is_read_and_slurm_patterns_expand(tmp_path: Path) -> None:
    nccl = b"cn-0411:2211:2213 [5] NCCL WARN Cuda failure 'uncorrectable ECC error encountered'\n"
    write(tmp_path / "home/u/train-4412.out", b"2026-11-02T10:30:00Z step 10\n" + nccl)
    write(
        tmp_path / "home/u/train-4412.err",
        b"2026-11-02T10:30:02Z torch.OutOfMemoryError: CUDA out of memory.\n",
    )
    c = ctx(
        stdout_path=str(tmp_path / "home/u/train-%j.out"),
        stderr_path=str(tmp_path / "home/u/train-4412.err"),
    )
    recs, cov = fetch(source(tmp_path, paths=["{stdout}", "{stderr}"]), c)
    assert [r.node for r in recs] == ["cn-0410", "cn-0410"] and cov.files == 2
    obs = pipeline.normalize(RawEvidence(job_id="4412", records=recs), c)
    nccl_obs = [o for o in obs if o.excerpt.startswith("cn-0411:")]
    assert nccl_obs and all(o.node == "cn-0411" for o in nccl_obs)  # NCCL origin host
    assert any(o.kind == "cuda_oom" and o.node == "cn-0410" for o in obs)


def test_stdout_outside_root_is_not_read(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "home"
    root.mkdir()
    write(outside / "slurm-4412.out", XID_B)
    write(root / "cn-0411/syslog", BORING)
    c = ctx(stdout_path=str(outside / "slurm-4412.out"))
    recs, cov = fetch(source(root, paths=["{node}/syslog", "{stdout}"]), c)
    assert recs == [] and cov.files == 1
    assert f"{{stdout}} {outside}/slurm-4412.out: outside the root {root}, not read" in cov.errors
    assert cov.status == "partial"


# --- rotation ------------------------------------------------------------------------------


def test_rotated_files_outside_the_window_are_not_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """syslog.2.gz ended (mtime) a day before the window: never opened, not even its head
    (its bytes are not gzip: opening it would be a coverage error). The current syslog
    starts after the window: only its head is read. syslog.1 spans the window: scanned."""
    day = timedelta(days=1)
    d = tmp_path / "cn-0411"
    write(d / "syslog", b"Nov  4 00:00:01 cn-0411 kernel: NVRM: Xid (PCI:0000:91:00): 79, later\n")
    write(d / "syslog.1", BORING + XID_B, mtime=END + day)
    (d / "syslog.2.gz").write_bytes(b"this is not gzip")
    os.utime(d / "syslog.2.gz", ((START - day).timestamp(), (START - day).timestamp()))
    scanned: list[str] = []
    heads: list[str] = []
    real_scan, real_head = FileScanner.scan_path, files_mod.first_line_time

    def spy_scan(self, path, display):  # type: ignore[no-untyped-def]
        scanned.append(Path(path).name)
        return real_scan(self, path, display)

    def spy_head(path, parser):  # type: ignore[no-untyped-def]
        heads.append(Path(path).name)
        return real_head(path, parser)

    monkeypatch.setattr(FileScanner, "scan_path", spy_scan)
    monkeypatch.setattr(files_mod, "first_line_time", spy_head)
    recs, cov = fetch(source(tmp_path, paths=["{node}/syslog*"]))
    assert scanned == ["syslog.1"]
    assert "syslog.2.gz" not in heads and sorted(heads) == ["syslog", "syslog.1"]
    assert [str(r.locator).rsplit("/", 1)[1] for r in recs] == ["syslog.1:2"]
    assert cov.files_skipped == 2 and cov.files == 1 and cov.errors == []
    # with the time test off every file is scanned (and the fake gzip is reported)
    scanned.clear()
    _, cov = fetch(source(tmp_path, paths=["{node}/syslog*"], skip_by_time=False))
    assert sorted(scanned) == ["syslog", "syslog.1", "syslog.2.gz"]
    assert any("syslog.2.gz: corrupt gzip" in e for e in cov.errors)


def test_fifo_and_dangling_link_in_the_root_are_reported_not_opened(tmp_path: Path) -> None:
    """A FIFO would block a reader forever: neither the rotation rule nor the scanner opens it."""
    write(tmp_path / "cn-0411/syslog", XID_B)
    os.mkfifo(tmp_path / "cn-0411/syslog.pipe")
    os.symlink(tmp_path / "nowhere", tmp_path / "cn-0411/syslog.1")
    recs, cov = fetch(source(tmp_path, paths=["{node}/syslog*"]))
    assert len(recs) == 1 and cov.files == 3 and cov.status == "partial"
    assert f"{tmp_path}/cn-0411/syslog.pipe: not a regular file, skipped" in cov.errors
    assert any(e.startswith(f"{tmp_path}/cn-0411/syslog.1: unreadable") for e in cov.errors)


def test_first_line_time_reads_gzip_heads_and_untimed_heads_are_kept(tmp_path: Path) -> None:
    from attribution_dagster.core.formats.timestamps import TimestampParser

    p = TimestampParser(START)
    gz = write(tmp_path / "kern.log-20261102.gz", XID_B * 50_000)
    assert files_mod.first_line_time(gz, p) == datetime(2026, 11, 2, 10, 3, 11, tzinfo=UTC)
    untimed = write(tmp_path / "x.out", b"NCCL WARN no time here\n2026-11-05T00:00:00Z later\n")
    assert files_mod.first_line_time(untimed, p) is None
    # a file whose first line is untimed may hold untimed lines of the job: read it
    write(tmp_path / "cn-0411/x.out", untimed.read_bytes())
    _, cov = fetch(source(tmp_path, paths=["{node}/x.out"]))
    assert cov.files == 1 and cov.files_skipped == 0


# --- cluster-level sources -----------------------------------------------------------------

SLURMCTLD = (
    b"[2026-11-02T10:06:58.412] error: Nodes cn-0999 not responding\n"
    b"[2026-11-02T10:07:02.000] sched: Allocate JobId=4413 NodeList=cn-0999 #CPUs=8\n"
    b"[2026-11-02T10:07:30.118] error: Nodes cn-0411.cluster.local not responding\n"
    b"[2026-11-02T10:07:40.118] error: Nodes cn-[0409-0411] not responding, setting DOWN\n"
    b"[2026-11-02T10:07:40.120] Killing JobId=4412 StepId=0 on failed node cn-0411\n"
    b"[2026-11-01T09:00:00.000] error: Nodes cn-0411 not responding\n"
)


def _cluster_obs(recs: list[RawRecord], c: ExecutionContext):  # type: ignore[no-untyped-def]
    obs = pipeline.normalize(RawEvidence(job_id=c.job_id, records=recs), c)
    return [(o.node, o.parser, str(o.locator.line), o.attrs.get("logged_on")) for o in obs]


def test_cluster_paths_attribute_lines_to_the_job_node_they_name(tmp_path: Path) -> None:
    write(tmp_path / "slurmctld/slurmctld.log", SLURMCTLD)
    write(tmp_path / "slurmctld/slurmctld.log.1", SLURMCTLD, mtime=START - timedelta(days=2))
    write(tmp_path / "events/atlas.txt", b"2026-11-02T10:07:00Z nothing about anyone\n")
    src = source(tmp_path, paths=[], cluster_paths=["slurmctld/slurmctld.log*", "events/*.txt"])
    recs, cov = fetch(src)
    assert {r.node for r in recs} == {CLUSTER_NODE}
    assert [str(r.locator).rsplit(":", 1)[1] for r in recs] == ["3", "4", "5"]
    assert cov.context_lines == 1  # `Nodes cn-0999 not responding`: no job node
    assert cov.out_of_window == 1  # the day-old line
    assert cov.files_skipped == 1  # slurmctld.log.1 ended two days before
    # a source of cluster files only is not meant to cover any node's own logs
    assert cov.nodes_read == [] and cov.nodes_missing == [] and cov.status == "ok"
    got = _cluster_obs(recs, ctx())
    assert got == [
        ("cn-0411", "srun_node_failure", "3", "*cluster*"),
        ("cn-0410", "srun_node_failure", "4", "*cluster*"),  # the hostlist names both
        ("cn-0411", "srun_node_failure", "4", "*cluster*"),
        ("cn-0411", "srun_node_failure", "5", "*cluster*"),
    ]


def test_case_logs_other_directory_is_a_cluster_level_source(tmp_path: Path) -> None:
    write(tmp_path / "logs/cn-0410/syslog", BORING.replace(b"cn-0411", b"cn-0410"))
    write(tmp_path / "logs/slurmctld/slurmctld.log", SLURMCTLD)
    write(
        tmp_path / "logs/k8s-events/events.txt",
        b"2026-11-02T10:07:00Z Warning NodeNotReady node/cn-0411 Node cn-0411 status is now: "
        b"NodeNotReady\n2026-11-02T10:07:05Z Warning NodeNotReady node/cn-7777 other\n",
    )
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(), ANCHORS, WINDOW).pair()
    assert cov.nodes_read == ["cn-0410"] and cov.nodes_missing == ["cn-0411"]
    assert cov.files == 3 and cov.errors == []
    cluster = [r for r in recs if r.node == CLUSTER_NODE]
    # the NodeNotReady event about a job node is kept; the one about cn-7777 is not
    assert sorted(str(r.locator) for r in cluster) == [
        "logs/k8s-events/events.txt:1",
        "logs/slurmctld/slurmctld.log:3",
        "logs/slurmctld/slurmctld.log:4",
        "logs/slurmctld/slurmctld.log:5",
    ]
    got = _cluster_obs(recs, ctx())
    assert ("cn-0411", "srun_node_failure", "5", "*cluster*") in got
    assert all(node in ("cn-0410", "cn-0411") for node, *_ in got)


def test_case_with_only_a_cluster_directory_is_not_empty(tmp_path: Path) -> None:
    write(tmp_path / "logs/slurmctld/slurmctld.log", SLURMCTLD)
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, ctx(), ANCHORS, WINDOW).pair()
    assert len(recs) == 3 and cov.nodes_read == []
    assert cov.nodes_missing == ["cn-0410", "cn-0411"] and cov.status == "partial"


def test_job_output_source_covers_the_batch_host_only(tmp_path: Path) -> None:
    write(tmp_path / "jobs/4412/slurm-4412.out", BORING)
    _, cov = fetch(source(tmp_path, paths=["jobs/{job_id}/*.out"]))
    assert cov.nodes_read == ["cn-0410"] and cov.nodes_missing == [] and cov.status == "ok"
    _, cov = fetch(source(tmp_path, paths=["jobs/{job_id}/*.err"]))
    assert cov.nodes_missing == ["cn-0410"] and cov.status == "empty"


def test_named_in_finds_job_nodes_in_free_text() -> None:
    index = NodeIndex(["cn-0410", "gpu-7.cluster.local"], {"gpu-7.cluster.local": ["10.0.0.7"]})
    assert index.named_in("error: Nodes cn-[0409-0410] not responding") == ["cn-0410"]
    assert index.named_in("Warning NodeNotReady node/GPU-7 is not ready") == ["gpu-7.cluster.local"]
    assert index.named_in("Nov  2 10:03:11 cn-0410 kernel: peer 10.0.0.7<54321>") == [
        "cn-0410",
        "gpu-7.cluster.local",
    ]
    assert index.named_in("JobId=12 NodeList=cn-0411,cn-04100 done") == []
    assert expand_hostlist("cn-[0009-0011,0020],gpu7") == [
        "cn-0009",
        "cn-0010",
        "cn-0011",
        "cn-0020",
        "gpu7",
    ]
    assert expand_hostlist("node-[b-c]") == ["node-[b-c]"]  # not a numeric range
    assert len(expand_hostlist("n[0-99999999]")) == 1  # absurd ranges are not expanded


# --- confinement ---------------------------------------------------------------------------


def _case_with_outside_links(tmp_path: Path) -> tuple[Path, Path]:
    case, outside = tmp_path / "case", tmp_path / "outside"
    write(outside / "secret.log", XID_B.replace(b"cn-0411", b"cn-0410"))
    write(outside / "dir/kern.log", XID_B)
    write(
        outside / "m.prom", b'DCGM_FI_DEV_XID_ERRORS{Hostname="cn-0410",gpu="0"} 79 1793613791000\n'
    )
    (case / "logs/cn-0410").mkdir(parents=True)
    (case / "context.json").write_text(ctx().model_dump_json())
    os.symlink(outside / "secret.log", case / "logs/cn-0410/syslog")
    os.symlink(outside / "dir", case / "logs/cn-0411")  # the node directory itself
    write(case / "logs/cn-0410/real/app.log", b"2026-11-02T10:05:00Z fine\n")
    os.symlink(case / "logs/cn-0410/real", case / "logs/cn-0410/inside")  # inside: fine
    (case / "metrics").mkdir()
    os.symlink(outside / "m.prom", case / "metrics/dcgm.prom")
    return case, outside


def test_case_symlinks_to_outside_are_not_followed(tmp_path: Path) -> None:
    case, _ = _case_with_outside_links(tmp_path)
    recs, cov = LocalFilesClient().fetch_logs(case, ctx(), ANCHORS, WINDOW).pair()
    assert recs == []
    assert "logs/cn-0410/syslog: symlink to outside the case, not read" in cov.errors
    assert "logs/cn-0411: symlink to outside the case, not read" in cov.errors
    assert cov.files == 1  # real/app.log, once although the inside link reaches it too
    assert cov.nodes_read == ["cn-0410"] and cov.status == "partial"
    samples, mcov = LocalFilesClient().fetch_metrics(case, ctx(), (), WINDOW)
    assert samples == [] and mcov is not None
    assert "metrics/dcgm.prom: symlink to outside the case, not read" in mcov.errors
    # and the whole analysis never sees the XID behind the link
    res = pipeline.analyze_case(case)
    assert not any("Xid" in ev.excerpt for ev in res.evidence)
    cov_all = pipeline.collect_evidence(case, ctx()).coverage
    assert any("symlink to outside the case" in e for c in cov_all for e in c.errors)


def test_root_symlinks_to_outside_are_not_followed(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    write(outside / "syslog", XID_B)
    write(root / "shared/syslog", XID_B.replace(b"cn-0411", b"cn-0410"))
    (root / "cn-0411").mkdir(parents=True)
    os.symlink(outside / "syslog", root / "cn-0411/syslog")
    os.symlink(root / "shared", root / "cn-0410")  # a node directory linked inside the root
    (root / "cn-0409").mkdir()
    os.symlink(outside, root / "cn-0409/var")  # a directory the template walks through
    c = ctx(["cn-0409", "cn-0410", "cn-0411"])
    recs, cov = fetch(source(root, paths=["{node}/syslog*", "{node}/var/syslog"]), c)
    assert [(r.node, str(r.locator)) for r in recs] == [("cn-0410", f"{root}/cn-0410/syslog:1")]
    assert f"{root}/cn-0411/syslog: symlink to outside the root {root}, not read" in cov.errors
    assert f"{root}/cn-0409/var: symlink to outside the root {root}, not read" in cov.errors


# --- node-name normalization ---------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        "gpu-017",
        "GPU-017",
        "gpu-017.cluster.local",
        "gpu-017:9400",
        "GPU-017.ib.cluster:9100",
        "10.1.0.17",
        "10.1.0.17:9400",
        "[fd00::17]:9400",
        "fd00::17",
        "gpu017-bmc",
    ],
)
def test_every_spelling_resolves_to_the_job_node(spelling: str) -> None:
    c = ctx(
        ["gpu-016", "gpu-017"],
        node_addresses={"gpu-017": ["10.1.0.17", "fd00::17", "gpu017-bmc"]},
    )
    assert NodeIndex.of(c).resolve(spelling) == "gpu-017"
    assert _resolve_host(spelling, c) == "gpu-017"
    sample = MetricSample(
        source="files",
        node="",
        locator="m:1",
        time=START,
        name="x",
        labels={"instance": spelling},
        value=1.0,
    )
    assert metric_node(sample, c) == "gpu-017"


def test_spellings_that_name_no_job_node() -> None:
    index = NodeIndex(["gpu-017", "10.1.0.12"])
    for other in ["gpu-0170", "gpu-018.cluster.local", "10.1.0.13", "10.1.0", "", "gpu"]:
        assert index.resolve(other) is None, other
    assert strip_port("[fd00::1]:9400") == "fd00::1" and strip_port("gpu:1:2") == "gpu:1:2"
    assert sample_nodes({"instance": "[fd00::1]:9400", "node": "gpu-7"}) == ["fd00::1", "gpu-7"]
    assert match_nodes(["GPU-017.cluster.local", "x"], ["gpu-017", "y"]) == {
        "gpu-017": "GPU-017.cluster.local"
    }


def test_case_directories_and_metric_labels_resolve_ip_aliases(tmp_path: Path) -> None:
    c = ctx(["gpu-016", "gpu-017"], node_addresses={"gpu-017": ["10.1.0.17"]})
    write(tmp_path / "logs/10.1.0.17/kern.log", XID_B)
    write(
        tmp_path / "metrics/dcgm.prom",
        b'DCGM_FI_DEV_XID_ERRORS{instance="10.1.0.17:9400",gpu="1"} 79 1793613791000\n',
    )
    recs, cov = LocalFilesClient().fetch_logs(tmp_path, c, ANCHORS, WINDOW).pair()
    assert [r.node for r in recs] == ["gpu-017"] and cov.nodes_read == ["gpu-017"]
    samples, _ = LocalFilesClient().fetch_metrics(tmp_path, c, (), WINDOW)
    assert [s.node for s in samples] == ["gpu-017"]


# --- end to end ----------------------------------------------------------------------------


def _tree_from_sample(sample: Path, root: Path, case: Path) -> None:
    """The sample's logs as a node log tree `<root>/<node>/<file>`, and a case directory that
    holds only its context.json. Each file's mtime is set to a little after the job's end, as
    on a cluster whose nodes wrote them (this machine's clock may be before a sample's dates,
    and a file last written before the window is, by the rotation rule, not read)."""
    end = pipeline.load_context(sample).end.timestamp() + 300
    for node_dir in (sample / "logs").iterdir():
        shutil.copytree(node_dir, root / node_dir.name)
    for path in root.rglob("*"):
        os.utime(path, (end, end))
    case.mkdir()
    shutil.copy(sample / "context.json", case / "context.json")
    if (sample / "topology").is_dir():  # issue 23: the topology stays with the case
        shutil.copytree(sample / "topology", case / "topology")


def _cluster_dirs(sample: Path) -> list[str]:
    """The sample's cluster-level log directories (a switch's syslog, OpenSM, UFM): no node."""
    nodes = set(pipeline.load_context(sample).nodes)
    return sorted(d.name for d in (sample / "logs").iterdir() if d.is_dir() and d.name not in nodes)


# every sample whose evidence is logs only (a files source reads logs; metrics come from
# a metrics source; flight-recorder dumps are read from a case's dumps/ only: a per-cluster
# dump path template is a follow-up of issue 18)
LOG_ONLY_SAMPLES = sorted(
    p.name
    for p in SAMPLES.iterdir()
    if (p / "context.json").is_file()
    and (p / "logs").is_dir()
    and not (p / "metrics").exists()
    and not (p / "dumps").exists()
)


def test_there_are_log_only_samples_to_compare() -> None:
    assert {"node-failure", "xid149-nvlink-3node", "app-cuda-oom"} <= set(LOG_ONLY_SAMPLES)


@pytest.mark.parametrize("name", LOG_ONLY_SAMPLES)
def test_configured_root_gives_the_same_result_as_the_case(tmp_path: Path, name: str) -> None:
    sample = SAMPLES / name
    root, case = tmp_path / "shared-logs", tmp_path / "case"
    _tree_from_sample(sample, root, case)
    cfg_file = tmp_path / "attribution.yaml"
    cfg_file.write_text(
        yaml.safe_dump(
            {
                "clusters": {
                    "x": {
                        "logs": [
                            {
                                "kind": "files",
                                "root": str(root),
                                "paths": ["{node}/*"],
                                "cluster_paths": [f"{d}/*" for d in _cluster_dirs(sample)],
                            }
                        ]
                    }
                }
            }
        )
    )
    cluster = clusters_from(load_config(cfg_file, environ={}).clusters)["x"]
    settings = AnalysisSettings(workers=1)
    got = pipeline.analyze_case(case, settings, sources=cluster.sources)
    want = pipeline.analyze_case(sample, settings)
    assert (got.status, got.category, got.suspect_nodes) == (
        want.status,
        want.category,
        want.suspect_nodes,
    )
    assert [(c.node, c.kind, c.role) for c in got.symptom_chain] == [
        (c.node, c.kind, c.role) for c in want.symptom_chain
    ]
    assert len(got.evidence) == len(want.evidence)
    assert all(ev.locator.startswith(str(root)) for ev in got.evidence if ev.source == "files")


def test_rendered_coverage_mentions_skipped_files_and_context_lines() -> None:
    from attribution_dagster.core.evidence import SourceCoverage
    from attribution_dagster.reports.render import coverage_lines

    line = coverage_lines([SourceCoverage(source="files", files_skipped=2, context_lines=3)])[0]
    assert "2 rotated file(s) outside the window not read" in line
    assert "3 cluster-level line(s) naming no job node" in line

"""Secrets never leak (issue 21 item 6).

Every back-end that takes a credential gets a distinctive one, configured the way a user
configures it: the NAME of an environment variable in attribution.yaml (Loki bearer and
basic auth, Prometheus bearer and basic auth, Elasticsearch API key, OpenSearch basic auth,
the pod-log and node-label Kubernetes bearer token, the slurmrestd JWT, the PostgreSQL
results-sink password) or, for the Kueue scheduler, a kubeconfig user's `token:`. Every
back-end is a local server that refuses: real Kubernetes Status / Elasticsearch / Loki /
slurmrestd error shapes are not needed for the point made here, which is what the tool
does with an error whatever its shape. Three ways to fail:

- `401`: the plain refusal a wrong credential gets;
- `echo`: a 500 (then a 400) whose body repeats the request's headers, credential
  included, in every field a connector might quote (`message`, `error.reason`,
  `errors[].error`, plain text): a misconfigured proxy or debug endpoint does this;
- `refused`: nothing listens on the port.

The analysis then runs through the CLI (`analyze CLUSTER/JOB`, `--json` and text, `--db`,
`discover`, `report` and `backfill` against the password-protected sink) and through the
Dagster per-job assets in process on an instance kept in a directory. The test asserts
that each credential reached its server (so it was there to leak) and that neither it nor
its base64 form appears in: stdout, stderr, the result JSON and its coverage errors, every
row of the results / asset-value databases, every Dagster event record, run record, job
snapshot and compute log of the instance, or any Python log record (DEBUG and up).
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import socket
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from attribution_dagster.cli.app import main

JOB_ID = "4242"
START, END = "2026-11-02T10:00:00Z", "2026-11-02T10:15:00Z"
NODES = ["gpu-a", "gpu-b"]
KINDS = ["loki", "loki_basic", "prometheus", "prometheus_basic", "elasticsearch", "opensearch",
         "pod_logs", "k8s_topology", "slurm", "kueue"]  # fmt: skip


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Secrets:
    """env var -> value, plus the basic-auth users (their base64 form must not leak either)."""

    env: dict[str, str] = field(default_factory=dict)
    users: dict[str, str] = field(default_factory=dict)  # env var -> basic-auth user
    kubeconfig_token: str = ""

    @classmethod
    def make(cls) -> Secrets:
        s = cls()
        for kind in [*KINDS, "pg"]:
            if kind != "kueue":
                s.env[f"SECRET_{kind.upper()}"] = f"s3cr3t-{kind}-{secrets.token_hex(8)}"
        s.kubeconfig_token = f"s3cr3t-kueue-{secrets.token_hex(8)}"
        s.users = {"SECRET_LOKI_BASIC": "reader", "SECRET_PROMETHEUS_BASIC": "prom",
                   "SECRET_OPENSEARCH": "admin"}  # fmt: skip
        return s

    def value(self, kind: str) -> str:
        return self.kubeconfig_token if kind == "kueue" else self.env[f"SECRET_{kind.upper()}"]

    def forms(self) -> list[str]:
        """Every spelling of a secret that must not appear: itself, its base64, and the
        base64 of user:password (the Authorization header of basic auth)."""
        out = [*self.env.values(), self.kubeconfig_token]
        out += [base64.b64encode(v.encode()).decode() for v in list(out)]
        out += [base64.b64encode(f"{u}:{self.env[e]}".encode()).decode()
                for e, u in self.users.items()]  # fmt: skip
        return out

    def sent(self, kind: str, headers: dict[str, str]) -> bool:
        value = self.value(kind)
        env = f"SECRET_{kind.upper()}"
        wanted = [value]
        if env in self.users:
            wanted.append(base64.b64encode(f"{self.users[env]}:{value}".encode()).decode())
        return any(w in v for v in headers.values() for w in wanted)


def assert_clean(where: str, text: str | bytes, s: Secrets) -> None:
    data = text if isinstance(text, str) else text.decode("utf-8", "replace")
    for form in s.forms():
        assert form not in data, f"a secret leaked into {where}: ...{_around(data, form)}..."


def _around(data: str, form: str) -> str:
    i = data.index(form)
    return data[max(0, i - 160): i + len(form) + 40].replace(form, "<SECRET>")


# -- the refusing back-ends ------------------------------------------------------------------


def refusal(mode: str, kind: str):  # -> handler for fake_http
    def answer(req) -> tuple:
        if mode == "401":
            if kind in ("pod_logs", "k8s_topology", "kueue"):
                return 401, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Failure", "message": "Unauthorized",
                             "reason": "Unauthorized", "code": 401}  # fmt: skip
            return 401, {"error": "unauthorized"}, {"WWW-Authenticate": 'Bearer realm="x"'}
        echoed = "; ".join(f"{k}: {v}" for k, v in req.headers.items())
        status = 500 if len(answer.seen) % 2 == 0 else 400
        answer.seen.append(req.path)
        if kind == "prometheus_basic":  # plain text, as a proxy in front would answer
            return status, f"bad request, headers were {echoed}"
        return status, {
            "kind": "Status", "status": "Failure", "code": status, "reason": "InternalError",
            "message": f"cannot serve {req.path}: headers {echoed}",
            "error": {"type": "security_exception", "reason": f"headers {echoed}",
                      "root_cause": [{"type": "x", "reason": echoed}]},
            "errors": [{"error": f"Authentication failure for {echoed}", "error_number": 1,
                        "description": echoed}],
            "status_text": echoed, "data": echoed,
        }  # fmt: skip

    answer.seen = []  # type: ignore[attr-defined]
    return answer


@pytest.fixture
def backends(request):
    """kind -> (base URL, server or None): one refusing server per back-end."""
    from fake_http import start_fake_http

    mode = request.param
    servers: dict[str, Any] = {}
    urls: dict[str, str] = {}
    for kind in KINDS:
        if mode == "refused":
            urls[kind] = f"http://127.0.0.1:{closed_port()}"
            continue
        fake = start_fake_http()
        handler = refusal(mode, kind)
        for method in ("GET", "POST", "PUT", "DELETE", "PATCH"):
            fake.route_prefix(method, "/", handler)
        servers[kind], urls[kind] = fake, fake.url
    yield mode, urls, servers
    for fake in servers.values():
        fake.server.shutdown()
        fake.server.server_close()


def write_setup(tmp: Path, urls: dict[str, str], s: Secrets) -> tuple[Path, Path]:
    """attribution.yaml (three clusters) and a case directory of cluster `lab` without
    evidence of its own, so that every configured back-end is asked."""
    ctx = {"job_id": JOB_ID, "scheduler": "slurm", "cluster": "lab", "state": "FAILED",
           "exit_code": 1, "start": START, "end": END, "nodes": NODES}  # fmt: skip
    (tmp / "jobs.jsonl").write_text(json.dumps(ctx) + "\n")
    case = tmp / "cases" / "job"
    case.mkdir(parents=True)
    (case / "context.json").write_text(json.dumps(ctx))
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kq",
        "clusters": [{"name": "kq", "cluster": {"server": urls["kueue"]}}],
        "users": [{"name": "reader", "user": {"token": s.kubeconfig_token}}],
        "contexts": [{"name": "kq", "context": {"cluster": "kq", "user": "reader"}}],
    }))  # fmt: skip
    fast = "retries: 1, backoff_seconds: 0.01, timeout_seconds: 2"
    cfg = tmp / "attribution.yaml"
    cfg.write_text(f"""\
clusters:
  lab:
    scheduler: {{kind: static, path: {tmp / "jobs.jsonl"}}}
    logs:
      - {{kind: loki, url: "{urls["loki"]}", bearer_token_env: SECRET_LOKI, {fast}}}
      - {{kind: loki, name: loki2, url: "{urls["loki_basic"]}", basic_user: reader,
          basic_password_env: SECRET_LOKI_BASIC, {fast}}}
      - {{kind: elasticsearch, url: "{urls["elasticsearch"]}", api_key_env: SECRET_ELASTICSEARCH,
          {fast}}}
      - {{kind: opensearch, url: "{urls["opensearch"]}", basic_user: admin,
          basic_password_env: SECRET_OPENSEARCH, {fast}}}
      - {{kind: pod_logs, api_url: "{urls["pod_logs"]}", token_env: SECRET_POD_LOGS,
          verify_tls: false, pod_selector: "job-name={{job_name}}", timeout_seconds: 2}}
    metrics:
      - {{kind: prometheus, url: "{urls["prometheus"]}", bearer_token_env: SECRET_PROMETHEUS,
          {fast}}}
      - {{kind: prometheus, name: prom2, url: "{urls["prometheus_basic"]}", basic_user: prom,
          basic_password_env: SECRET_PROMETHEUS_BASIC, {fast}}}
    topology:
      - {{kind: kubernetes_labels, api_url: "{urls["k8s_topology"]}",
          token_env: SECRET_K8S_TOPOLOGY, timeout_seconds: 2}}
  rest:
    scheduler: {{kind: slurm, restd_url: "{urls["slurm"]}", jwt_env: SECRET_SLURM,
                 api_version: v0.0.41, {fast}}}
  kq:
    scheduler: {{kind: kueue, kubeconfig: {kubeconfig}, context: kq, timeout_seconds: 2}}
sink:
  url: "postgresql+psycopg://attrib@127.0.0.1:{closed_port()}/attribution"
  password_env: SECRET_PG
fleet:
  reports_dir: {tmp / "reports"}
retry: {{max_retries: 1, delay_seconds: 0}}
""")
    return cfg, case


# -- the places a secret could end up --------------------------------------------------------


def sqlite_rows(path: Path) -> str:
    """Every row of every table of a SQLite file, as text (a byte scan could miss a value
    split across overflow pages)."""
    con = sqlite3.connect(path)
    try:
        out = []
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'"):
            out += [repr(row) for row in con.execute(f'SELECT * FROM "{table}"')]
        return "\n".join(out)
    finally:
        con.close()


def instance_text(instance: Any) -> str:
    """Every run, its config and tags, its job and execution-plan snapshots, every event
    record of every run, and the asset / partition records of the instance, serialized."""
    from dagster._serdes import serialize_value

    parts: list[str] = []
    runs = instance.get_runs()
    assert runs, "the Dagster path made no run"
    for run in runs:
        parts.append(serialize_value(run))
        if run.job_snapshot_id:
            parts.append(serialize_value(instance.get_job_snapshot(run.job_snapshot_id)))
        if run.execution_plan_snapshot_id:
            parts.append(serialize_value(
                instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)))
        parts += [serialize_value(e) for e in instance.all_logs(run.run_id)]
    return "\n".join(parts)


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


# -- the test --------------------------------------------------------------------------------


@pytest.mark.parametrize("backends", ["401", "echo", "refused"], indirect=True)
def test_no_secret_leaks_from_any_backend_error(backends, tmp_path, monkeypatch, capsys, caplog):
    mode, urls, servers = backends
    s = Secrets.make()
    for name, value in s.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ATTRIBUTION_STORE_URL", raising=False)
    monkeypatch.delenv("ATTRIBUTION_SINK_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    caplog.set_level(logging.DEBUG)
    cfg, case = write_setup(tmp_path, urls, s)
    outputs: list[tuple[str, str]] = []

    def cli(*argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--config", str(cfg)])
        out, err = capsys.readouterr()
        outputs.append((" ".join(argv), out + err))
        return code, out, err

    # (a) the CLI: the job from the static scheduler, its evidence from every refusing
    # back-end; the result is printed, stored, and its coverage names every source's error
    results_db = tmp_path / "cli-results.db"
    code, out, err = cli("analyze", f"lab/{JOB_ID}", "--json", "--db", f"sqlite:///{results_db}")
    assert code == 0, err
    result = json.loads(out)
    errors = [e for c in result["coverage"] for e in c.get("errors", [])]
    failed = {c["source"] for c in result["coverage"] if c.get("errors")}
    assert len(failed) >= 7, result["coverage"]  # every log and metric back-end said why
    assert errors, result["coverage"]
    code, out, err = cli("analyze", f"lab/{JOB_ID}")
    assert code == 0 and "evidence read" in out
    code, out, err = cli("analyze", str(case), "--json")
    assert code == 0
    # the schedulers: slurmrestd (JWT) and Kueue (kubeconfig token) fail with exit 4 or 2
    for argv in (("analyze", f"rest/{JOB_ID}"), ("discover", "rest", "--since", "2026-11-01"),
                 ("analyze", "kq/team-a/llama"), ("discover", "kq", "--since", "2026-11-01")):
        code, out, err = cli(*argv)
        assert code in (2, 4) and err.startswith("attribution"), (argv, code, err)
    # the PostgreSQL results sink (password from SECRET_PG) is unreachable
    for argv in (("report", "--week", "2026-W45"),
                 ("backfill", "lab", "--since", "2026-11-02", "--until", "2026-11-03",
                  "--instance", str(tmp_path / "fleet-dagster"))):
        code, out, err = cli(*argv)
        assert code != 0 and err.strip(), (argv, code, out, err)

    # (b) Dagster: the per-job assets in process on an instance in a directory, the sink the
    # configured PostgreSQL one (its password an EnvVar), the asset values in SQLite
    from dagster import DagsterInstance

    from attribution_dagster.assets.per_job import JOBS_PARTITIONS
    from attribution_dagster.cli.local_run import write_instance_yaml
    from attribution_dagster.connectors.clusters import load_checked_config
    from attribution_dagster.definitions import ATTRIBUTE_JOB, build_definitions
    from attribution_dagster.resources.value_store import AssetValueStore

    store_db = tmp_path / "store.db"
    monkeypatch.setenv("ATTRIBUTION_STORE_URL", f"sqlite:///{store_db}")
    config = load_checked_config(cfg).model_copy(update={"case_root": str(case.parent)})
    key = f"lab.{JOB_ID}"
    AssetValueStore(f"sqlite:///{store_db}").index_cases({key: str(case)})
    home = tmp_path / "dagster"
    home.mkdir()
    write_instance_yaml(home)
    job = build_definitions(config).resolve_job_def(ATTRIBUTE_JOB)
    with DagsterInstance.from_config(str(home)) as instance:
        instance.add_dynamic_partitions(JOBS_PARTITIONS.name, [key])
        outcome = job.execute_in_process(instance=instance, partition_key=key,
                                         raise_on_error=False)  # fmt: skip
        assert not outcome.success  # the sink cannot be reached...
        failure = next(e for e in outcome.all_events if e.is_step_failure)
        assert "results" in failure.step_key or "attribution" in failure.step_key
        stored = AssetValueStore(f"sqlite:///{store_db}").get("raw_evidence", [key])[key]
        assert stored.ok and any(c["errors"] for c in json.loads(stored.payload)["coverage"])
        assert_clean("the Dagster instance (runs, snapshots, event log)",
                     instance_text(instance), s)  # fmt: skip

    # every credential reached its server (or, refused, was at least read to be sent)
    if servers:
        for kind, fake in servers.items():
            assert any(s.sent(kind, r.headers) for r in fake.requests), f"{kind} got no secret"
        for kind in ("pod_logs", "k8s_topology", "kueue"):  # as the API server wants it
            assert {r.headers.get("authorization") for r in servers[kind].requests} == {
                f"Bearer {s.value(kind)}"}, kind

    for argv, text in outputs:
        assert_clean(f"the output of `attribution {argv}`", text, s)
    assert_clean("the result JSON and its coverage errors", json.dumps(result), s)
    for db in (results_db, store_db):
        assert_clean(f"the rows of {db.name}", sqlite_rows(db), s)
    for path in files_under(home) + files_under(tmp_path / "fleet-dagster"):
        assert_clean(f"the file {path.relative_to(tmp_path)}", path.read_bytes(), s)
    for path in files_under(tmp_path / "reports") if (tmp_path / "reports").exists() else []:
        assert_clean(f"the report {path}", path.read_bytes(), s)
    assert caplog.records  # the runs did log
    for r in caplog.records:
        assert_clean(f"a log record of {r.name} ({r.levelname})",
                     f"{r.getMessage()} {r.exc_text or ''}", s)  # fmt: skip


# -- the mask itself -------------------------------------------------------------------------


def test_remembered_secrets_are_masked_in_every_form(caplog):
    from attribution_dagster.connectors.base import SourceError
    from attribution_dagster.core.secrets import MASK, redact, remember

    token, password = f"tok-{secrets.token_hex(8)}", f"pw/{secrets.token_hex(8)}"
    short = "abc123"  # below MIN_LENGTH: ordinary text, never masked
    remember(token)
    remember(password, user="reader")
    remember(short)
    basic = base64.b64encode(f"reader:{password}".encode()).decode()
    text = f"a {token} b {base64.b64encode(token.encode()).decode()} c Basic {basic} d abc123"
    assert redact(text) == f"a {MASK} b {MASK} c Basic {MASK} d abc123"
    assert redact(f"x={password.replace('/', '%2F')}") == f"x={MASK}"  # URL-encoded
    assert str(SourceError(f"server said: Bearer {token}")) == f"server said: Bearer {MASK}"
    caplog.set_level(logging.DEBUG, logger="some.client.library")
    logging.getLogger("some.client.library").debug("response body: %s", {"auth": token})
    assert caplog.records[-1].getMessage() == f"response body: {{'auth': '{MASK}'}}"


def test_kubernetes_token_env_is_sent_as_a_bearer_token(fake_http, monkeypatch):
    """kubernetes >= 36 reads the key `BearerToken`: with only `authorization` set, the
    token went out without its `Bearer ` prefix and a real API server answered 401."""
    from attribution_dagster.connectors.kubernetes.api import build_api_client

    fake_http.route("GET", "/api/v1/nodes", lambda req: (200, {"kind": "NodeList", "items": []}))
    token = f"k8s-{secrets.token_hex(8)}"
    api = build_api_client(api_url=fake_http.url, token_env="K8S_T", environ={"K8S_T": token})
    from kubernetes.client import CoreV1Api

    CoreV1Api(api).list_node(_preload_content=False)
    assert fake_http.requests[-1].headers["authorization"] == f"Bearer {token}"

"""Score the blind topology held-out cases (tests/heldout/topology/<case>/) against the engine.

The cases were written blind (see README.md); this script is how their first-run score is taken.
Per case it prints whether the verdict matches (failed, status, category, suspect_nodes as a set,
candidate_categories as a subset of the result's candidates, as tests/test_heldout.py checks) and
whether the fault domain matches field by field (level, name, nodes as a set, ports as a set),
then the totals.

    PYTHONPATH=$PWD python tests/heldout/topology/score.py            # run the engine, score
    PYTHONPATH=$PWD python tests/heldout/topology/score.py --validate # check the case files only
    PYTHONPATH=$PWD python tests/heldout/topology/score.py t07 t08    # only these cases

Ports compare as (node, host_port, switch, switch_port) with switch_port as a string and the host
port's trailing IB port number dropped ("mlx5_2/1", "mlx5_2:1" and "mlx5_2" are one port), since
the spec does not fix how a host port is spelled. `--validate` never imports the engine.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

HERE = Path(__file__).resolve().parent
SCHEDULERS = {"slurm", "kueue", "static", "kai"}
STATES = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"}
GPUS = {"A100", "H100", "L40S", "B200", "GB200", "GB300"}
LEVELS = {"link", "leaf", "spine", "nvlink_domain"}
STATUSES = {"attributed", "ambiguous", "unattributed", "not_failed"}


def case_dirs(filters: list[str]) -> list[Path]:
    out = sorted(
        p.parent for p in HERE.glob("*/expected.json") if (p.parent / "context.json").is_file()
    )
    return [c for c in out if not filters or any(f in c.name for f in filters)]


# ------------------------------------------------------------------ validation (no engine)
def _rfc3339(v: object) -> bool:
    if not isinstance(v, str) or not re.match(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$", v
    ):
        return False
    datetime.fromisoformat(v.replace("Z", "+00:00"))
    return True


def validate_context(ctx: dict) -> list[str]:
    """The context.json table of spec/case-format.md, section 1."""
    err = []
    for key in ("job_id", "scheduler", "state", "start", "end", "nodes"):
        if key not in ctx:
            err.append(f"missing required field {key}")
    if not isinstance(ctx.get("job_id"), str):
        err.append("job_id must be a string")
    if ctx.get("scheduler") not in SCHEDULERS:
        err.append(f"scheduler {ctx.get('scheduler')!r} not one of {sorted(SCHEDULERS)}")
    if ctx.get("state") not in STATES:
        err.append(f"state {ctx.get('state')!r} not in the Slurm vocabulary")
    for key in ("start", "end"):
        if not _rfc3339(ctx.get(key)):
            err.append(f"{key} is not RFC 3339 with an offset")
    if not err and datetime.fromisoformat(
        ctx["start"].replace("Z", "+00:00")
    ) > datetime.fromisoformat(ctx["end"].replace("Z", "+00:00")):
        err.append("start is after end")
    nodes = ctx.get("nodes")
    if not (isinstance(nodes, list) and nodes and all(isinstance(n, str) and n for n in nodes)):
        err.append("nodes must be a non-empty list of strings")
    elif len(set(nodes)) != len(nodes):
        err.append("nodes has duplicates")
    if "exit_code" in ctx and not isinstance(ctx["exit_code"], int):
        err.append("exit_code must be an int")
    if "gpu_model" in ctx and ctx["gpu_model"] not in GPUS:
        err.append(f"gpu_model {ctx['gpu_model']!r} not in {sorted(GPUS)}")
    if "log_timezone" in ctx:
        try:
            ZoneInfo(ctx["log_timezone"])
        except (ZoneInfoNotFoundError, ValueError):
            err.append(f"log_timezone {ctx['log_timezone']!r} is not an IANA zone")
    na = ctx.get("node_addresses")
    if na is not None and not (
        isinstance(na, dict)
        and all(isinstance(v, list) and all(isinstance(a, str) for a in v) for v in na.values())
    ):
        err.append("node_addresses must map node -> list of strings")
    return err


def validate_expected(exp: dict, ctx: dict) -> list[str]:
    err = []
    nodes = set(ctx.get("nodes", []))
    for key in (
        "failed",
        "status",
        "category",
        "suspect_nodes",
        "candidate_categories",
        "fault_domain",
        "why",
    ):
        if key not in exp:
            err.append(f"expected.json lacks {key}")
    if exp.get("status") not in STATUSES:
        err.append(f"status {exp.get('status')!r}")
    if not set(exp.get("suspect_nodes", [])) <= nodes:
        err.append("a suspect node is not a job node")
    fd = exp.get("fault_domain")
    if fd is not None:
        if set(fd) != {"level", "name", "nodes", "ports"}:
            err.append(f"fault_domain keys {sorted(fd)}")
        if fd.get("level") not in LEVELS:
            err.append(f"fault_domain level {fd.get('level')!r}")
        if not set(fd.get("nodes", [])) <= nodes:
            err.append("a fault_domain node is not a job node")
        for p in fd.get("ports", []):
            if set(p) != {"node", "host_port", "switch", "switch_port"} or p["node"] not in nodes:
                err.append(f"bad port {p}")
    return err


def _lldp_interfaces(doc: dict) -> dict[str, dict]:
    iface = doc.get("lldp", {}).get("interface", {})
    items = iface if isinstance(iface, list) else [iface]
    out: dict[str, dict] = {}
    for it in items:
        out.update(it)
    return out


def check_ports_against_topology(case: Path, exp: dict) -> list[str]:
    """Self-check of the case data: the case's own topology prints each expected cable."""
    fd = exp.get("fault_domain") or {}
    err = []
    ibnd = case / "topology" / "ibnetdiscover.txt"
    text = ibnd.read_text() if ibnd.is_file() else ""
    for p in fd.get("ports", []):
        if p["switch_port"].isdigit():
            block = re.search(
                r'^Switch\t\d+ "S-[0-9a-f]+"\t\t# "[^"]*?'
                + re.escape(p["switch"])
                + r'[:"][^\n]*\n((?:\[.*\n)*)',
                text,
                re.M,
            )
            want = f'[{p["switch_port"]}]\t"H-'
            line = next(
                (ln for ln in (block[1].splitlines() if block else []) if ln.startswith(want)), ""
            )
            if f'# "{p["node"]} {p["host_port"]}"' not in line:
                err.append(f"ibnetdiscover does not cable {p}")
        else:
            files = [
                f
                for f in (case / "topology" / "lldp").glob("*.json")
                if f.stem.split(".")[0] == p["node"]
            ]
            ok = False
            for f in files:
                ifs = _lldp_interfaces(json.loads(f.read_text()))
                nb = ifs.get(p["host_port"], {})
                ok = ok or (
                    p["switch"] in nb.get("chassis", {})
                    and nb.get("port", {}).get("id", {}).get("value") == p["switch_port"]
                )
            if not ok:
                err.append(f"lldp does not show {p}")
    return err


def validate(case: Path) -> list[str]:
    err = []
    for f in sorted(case.rglob("*.json")):
        try:
            json.loads(f.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            err.append(f"{f.relative_to(case)}: {e}")
    if err:
        return err
    ctx = json.loads((case / "context.json").read_text())
    exp = json.loads((case / "expected.json").read_text())
    err += [f"context.json: {e}" for e in validate_context(ctx)]
    err += [f"expected.json: {e}" for e in validate_expected(exp, ctx)]
    err += check_ports_against_topology(case, exp)
    ty = case / "topology" / "topology.yaml"
    if ty.is_file():
        try:
            import yaml

            yaml.safe_load(ty.read_text())
        except ImportError:
            pass
        except yaml.YAMLError as e:
            err.append(f"topology.yaml: {e}")
    if not (case / "logs").is_dir():
        err.append("no logs/ directory")
    return err


# ------------------------------------------------------------------ scoring (runs the engine)
def _host_port(v: object) -> object:
    if not isinstance(v, str):
        return v
    m = re.match(r"^(mlx\d+_\d+|hca-\d+)(?:\s*(?:[/:]|\s+port\s*)\s*\d+)?$", v.strip(), re.I)
    return (m[1] if m else v.strip()).lower()


def _ports(ports: object) -> set[tuple]:
    out = set()
    for p in ports or []:
        p = p if isinstance(p, dict) else dict(p)
        out.add(
            (
                p.get("node"),
                _host_port(p.get("host_port")),
                p.get("switch"),
                str(p.get("switch_port")),
            )
        )
    return out


def compare_fault_domain(want: dict | None, got: dict | None) -> dict[str, bool]:
    if want is None or got is None:
        same = want is None and got is None
        return {"level": same, "name": same, "nodes": same, "ports": same}
    return {
        "level": got.get("level") == want["level"],
        "name": got.get("name") == want["name"],
        "nodes": set(got.get("nodes") or []) == set(want["nodes"]),
        "ports": _ports(got.get("ports")) == _ports(want["ports"]),
    }


def score(case: Path) -> tuple[bool, dict[str, bool], str]:
    from attribution_dagster.pipeline import analyze_case

    exp = json.loads((case / "expected.json").read_text())
    try:
        doc = json.loads(analyze_case(case).contract_json())
    except Exception as e:  # noqa: BLE001 - a crash is a miss for this case, not the end of the run
        return (
            False,
            compare_fault_domain(exp["fault_domain"], {}),
            f"engine error: {type(e).__name__}: {e}",
        )
    cands = {c["category"] for c in doc.get("candidates", [])}
    verdict = (
        doc.get("failed") == exp["failed"]
        and doc.get("status") == exp["status"]
        and doc.get("category") == exp["category"]
        and set(doc.get("suspect_nodes", [])) == set(exp["suspect_nodes"])
        and set(exp.get("candidate_categories", [])) <= cands
    )
    got_fd = doc.get("fault_domain")
    fd = compare_fault_domain(exp["fault_domain"], got_fd)
    detail = (
        f"got status={doc.get('status')} category={doc.get('category')}"
        f" suspects={sorted(doc.get('suspect_nodes', []))}"
        f" fault_domain={json.dumps(got_fd, sort_keys=True)}"
    )
    return verdict, fd, detail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "filters", nargs="*", help="only cases whose directory name contains one of these"
    )
    ap.add_argument(
        "--validate", action="store_true", help="check the case files only; do not run the engine"
    )
    args = ap.parse_args()
    cases = case_dirs(args.filters)
    if not cases:
        print("no cases found", file=sys.stderr)
        return 2
    if args.validate:
        bad = 0
        for c in cases:
            errs = validate(c)
            bad += bool(errs)
            print(f"{c.name:48s} {'ok' if not errs else 'INVALID'}")
            for e in errs:
                print(f"    {e}")
        print(f"valid: {len(cases) - bad}/{len(cases)}")
        return 1 if bad else 0
    n_verdict = n_fd = n_both = 0
    fields = {"level": 0, "name": 0, "nodes": 0, "ports": 0}
    for c in cases:
        verdict, fd, detail = score(c)
        n_verdict += verdict
        n_fd += all(fd.values())
        n_both += verdict and all(fd.values())
        for k, v in fd.items():
            fields[k] += v
        marks = " ".join(f"{k}={'ok' if v else 'MISS'}" for k, v in fd.items())
        print(f"{c.name:48s} verdict={'ok' if verdict else 'MISS'}  fault_domain: {marks}")
        if not verdict or not all(fd.values()):
            print(f"    {detail}")
    n = len(cases)
    print(f"verdict (status/category/suspects): {n_verdict}/{n}")
    print(
        f"fault_domain (all four fields):     {n_fd}/{n}  "
        + " ".join(f"{k} {v}/{n}" for k, v in fields.items())
    )
    print(f"both:                               {n_both}/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Score the real-threads held-out set: analyze_case over each case, got vs expected.

Run from the repository root:  .venv/bin/python tests/heldout/real-threads/score.py [-v]

A case passes when failed, status, category and suspect_nodes (as a set) all match its
expected.json. For `ambiguous` cases the expected candidate_categories are also reported
(each must appear among the result's candidates), but they do not decide pass/fail here.
-v adds the result's root-cause observations and candidates for every miss.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _cases() -> list[Path]:
    return sorted(
        p.parent for p in HERE.glob("*/expected.json") if (p.parent / "context.json").is_file()
    )


def main(argv: list[str]) -> int:
    from attribution_dagster.pipeline import analyze_case

    verbose = "-v" in argv
    cases = _cases()
    passed = 0
    misses: list[str] = []
    for case in cases:
        exp = json.loads((case / "expected.json").read_text())
        want = (exp["failed"], exp["status"], exp["category"], frozenset(exp["suspect_nodes"]))
        try:
            res = analyze_case(case)
        except Exception as e:  # a crash is a miss, reported as such
            print(f"MISS {case.name}: analyze_case raised {type(e).__name__}: {e}")
            if verbose:
                traceback.print_exc()
            misses.append(case.name)
            continue
        got = (res.failed, res.status, res.category, frozenset(res.suspect_nodes))
        cands = sorted({c.category for c in res.candidates})
        cand_note = ""
        if exp.get("candidate_categories"):
            missing = sorted(set(exp["candidate_categories"]) - set(cands))
            cand_note = f"  candidates want {exp['candidate_categories']} got {cands}" + (
                f" (missing {missing})" if missing else ""
            )
        ok = got == want
        passed += ok
        tag = "ok  " if ok else "MISS"
        print(
            f"{tag} {case.name}\n"
            f"     want failed={want[0]} status={want[1]} category={want[2]} "
            f"suspects={sorted(want[3])}\n"
            f"     got  failed={got[0]} status={got[1]} category={got[2]} "
            f"suspects={sorted(got[3])}{cand_note}"
        )
        if not ok:
            misses.append(case.name)
            if verbose:
                roots = [o for o in res.symptom_chain if o.role == "root_cause"]
                for o in roots[:5]:
                    print(f"       root_cause: {o.node} {o.kind}: {o.summary}")
                for c in res.candidates[:5]:
                    print(f"       candidate: {c.category} {list(c.nodes)} {c.score}")
                chain = [o for o in res.symptom_chain if o.role != "root_cause"][:4]
                for o in chain:
                    print(f"       symptom: {o.node} {o.kind}: {o.summary}")
    print(f"\nTOTAL {passed}/{len(cases)}")
    if misses:
        print("misses: " + ", ".join(misses))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

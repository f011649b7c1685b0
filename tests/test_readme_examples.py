"""The README's examples are real output (issue 19 item 6): every `<!-- example: CMD -->`
block is run again (scripts/readme_examples.py: `attribution analyze` in process, and
`make run`'s command through Dagster into a temporary directory) and compared line by line.
Only the elapsed seconds and the rule catalog's hash are masked. A failure shows the diff;
`python scripts/readme_examples.py` rewrites the blocks."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

import readme_examples as rx  # noqa: E402


def test_every_readme_example_is_what_the_command_prints():
    text = rx.README.read_text(encoding="utf-8")
    found = rx.examples(text)
    assert {"make run head=8 tail=3",
            "attribution analyze samples/xid149-nvlink-3node head=16 tail=3"} <= set(found)
    diffs = rx.differences(text)
    assert not diffs, (
        "README examples differ from real output; run `python scripts/readme_examples.py`\n"
        + "\n".join(diffs)
    )


def test_a_changed_example_is_caught_and_only_volatile_parts_are_masked():
    spec = "attribution analyze samples/xid149-nvlink-3node head=4"
    real = rx.run(spec)
    assert real.startswith("$ attribution analyze samples/xid149-nvlink-3node\n")
    assert "look first at: node-b PCI 0009:01:00 port link 5" in real
    block = f"<!-- example: {spec} -->\n```\n{{}}```\n<!-- /example -->\n"
    assert rx.differences(block.format(real)) == []
    wrong = real.replace("confidence 0.82", "confidence 0.91")
    [diff] = rx.differences(block.format(wrong))
    assert "-  ATTRIBUTED: gpu.nvlink  confidence 0.91" in diff
    # the regenerated README text holds the real block again
    assert rx.regenerate(block.format(wrong)) == block.format(real)
    assert rx.mask("38 jobs in 2.4 s through Dagster; rules 2026.12.1+8ba77400") == (
        rx.mask("38 jobs in 13 s through Dagster; rules 2026.12.1+0123abcd")
    )
    assert rx.mask("rules 2026.12.1+8ba77400") != rx.mask("rules 2026.12.2+8ba77400")

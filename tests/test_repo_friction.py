"""Everyday friction: `make ui PORT=...` and the repository's Markdown links."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
UI = ROOT / "scripts" / "ui.sh"


def _ui_port(port: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PORT": port, "UI_DRY_RUN": "1",
           "VENV_BIN": str(Path(sys.executable).parent)}
    return subprocess.run(["bash", str(UI)], env=env, capture_output=True, text=True,
                          timeout=60, check=False)


def test_ui_uses_port_and_moves_off_a_taken_one():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        out = _ui_port(str(taken))
        assert out.returncode == 0, out.stderr
        got = int(out.stdout.strip())
        assert got > taken and f"port {taken} is taken; using {got}" in out.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    out = _ui_port(str(free))
    assert out.returncode == 0 and int(out.stdout.strip()) == free
    assert _ui_port("abc").returncode == 2


def test_make_ui_passes_port():
    text = (ROOT / "Makefile").read_text()
    assert "PORT ?= 3000" in text and "PORT=$(PORT) scripts/ui.sh" in text
    assert '-p "$PORT"' in UI.read_text()


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)


def _markdown_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    if out.returncode == 0 and out.stdout.strip():
        return [ROOT / p for p in out.stdout.split()]
    skip = {".venv", ".git", "node_modules", ".dagster", ".attribution"}
    return [p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)]


def test_every_relative_link_in_markdown_resolves():
    files = _markdown_files()
    assert ROOT / "README.md" in files
    dead = []
    for md in files:
        text = _FENCE.sub("", md.read_text(encoding="utf-8"))
        text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
        for m in _LINK.finditer(text):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
                continue  # http:, mailto:, data:, anchors
            path = unquote(target.split("#", 1)[0])
            if not path:
                continue
            resolved = (ROOT / path.lstrip("/")) if path.startswith("/") else md.parent / path
            if not resolved.exists():
                dead.append(f"{md.relative_to(ROOT)}: {target}")
    assert not dead, "dead links:\n" + "\n".join(dead)

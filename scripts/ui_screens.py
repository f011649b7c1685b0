"""The Dagster UI in a real browser: the browser test (tests/dagster/test_browser.py) and
`make screenshots` (docs/screens/*.png) both drive it through `UiSession`.

    python scripts/ui_screens.py docs/screens       # the README's screens

A session is a throwaway directory in which a few samples were attributed through the
per-job assets (`run_cases_report`, as `make run` does) and one week's fleet report was
materialized (`weekly_report_job`); the real `dagster-webserver` on a free loopback port
over that instance; headless Chromium driven by Playwright. Playwright comes from PyPI
(`pip install playwright`) and is pointed at Debian's `chromium` binary
(`apt-get install chromium`): no `playwright install`, no browser download.

The instance is prepared in a child process, so the code location the webserver loads and
the one that wrote the events read the same ATTRIBUTION_CONFIG and nothing of the caller's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
BIN = Path(sys.executable).parent
# One ISO week of the samples (2026-11-02 .. 11-08: attributed, ambiguous, unattributed,
# a healthy job), plus a Kueue job whose `namespace/name` id makes a cleaned key.
CASES = (
    "xid149-nvlink-3node",
    "ambiguous-xid-and-ib",
    "unattributed-only-symptoms",
    "metrics-only-cause",
    "healthy-completed-transient",
    "kueue-oomkilled",
)
WEEK = "2026-11-02"
SCOPE = "fleet"
REPORT_KEY = f"{SCOPE}|{WEEK}"  # MultiPartitionKey: dimensions in name order (scope, week)
SHOW_KEY = "gb200-nvl72-east.4812"  # xid149-nvlink-3node: attributed, with a look-first line


class NoBrowser(RuntimeError):
    """No Chromium binary or no Playwright package: the message says which and how to get it."""


def find_chromium() -> str:
    """$CHROMIUM, else Debian's `chromium` (or `chromium-browser`) on PATH."""
    found = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser"
    )
    if not found:
        raise NoBrowser("no chromium binary on PATH (apt-get install -y chromium)")
    if not os.access(found, os.X_OK):
        raise NoBrowser(f"CHROMIUM={found} is not an executable")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        raise NoBrowser(
            "the playwright package is not installed (pip install -e '.[dev]')"
        ) from None
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTRIBUTION_")}
    env.update(
        DAGSTER_HOME=str(work / "home"),
        ATTRIBUTION_CONFIG=str(work / "attribution.yaml"),
        PYTHONPATH=os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    return env


def prepare(work: Path, cases: tuple[str, ...] = CASES) -> None:
    """Copy the cases, write the config, attribute them and build the week's report."""
    root = work / "cases"
    root.mkdir(parents=True)
    for name in cases:
        shutil.copytree(SAMPLES / name, root / name)
    (work / "home").mkdir()
    (work / "attribution.yaml").write_text(
        f"case_root: {root}\n"
        f"sink:\n  url: sqlite:///{work}/results.db\n"
        "sensor:\n  enabled: false\n"
        f"fleet:\n  reports_dir: {work}/reports\n  report_schedule: false\n"
    )
    out = subprocess.run(
        [sys.executable, __file__, "--prepare", str(work)],
        env=_env(work), cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"preparing the instance failed:\n{out.stdout}\n{out.stderr[-3000:]}")


def _prepare_child(work: Path) -> None:
    """In the child: `run` the cases into the instance, then the week's fleet report."""
    import warnings

    from dagster import DagsterInstance, MultiPartitionKey

    from attribution_dagster import definitions
    from attribution_dagster.cli.local_run import run_cases_report
    from attribution_dagster.core.config import load_config

    config = load_config(work / "attribution.yaml")
    report = run_cases_report(
        work / "cases", config.resolved_sink_url(), instance_dir=work / "home", config=config
    )
    if report.failed or report.skipped:
        raise SystemExit(f"cases failed: {report.failed} {report.skipped}")
    with DagsterInstance.from_config(str(work / "home")) as instance, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        defs = definitions.defs()
        result = defs.resolve_job_def("weekly_report_job").execute_in_process(
            instance=instance,
            partition_key=MultiPartitionKey({"scope": SCOPE, "week": WEEK}),
            raise_on_error=False,
        )
        if not result.success:
            raise SystemExit("weekly_report failed")
    print(json.dumps({"partitions": report.partitions}))


def _post(url: str, query: str) -> dict[str, Any]:
    req = urllib.request.Request(
        url, data=json.dumps({"query": query}).encode(), method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


LOCATION = "{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError "
LOCATION += "{ __typename ... on PythonError { message } } } } } }"


@dataclass
class UiSession:
    """A webserver over a prepared instance, and a Playwright page on it."""

    work: Path
    base: str = ""
    page: Any = None
    _procs: list[Any] = field(default_factory=list)

    def goto(self, path: str, wait_text: str | list[str], timeout: float = 60) -> None:
        """Open `path` and wait until every `wait_text` shows and no spinner is left."""
        self.page.goto(self.base + path)
        texts = [wait_text] if isinstance(wait_text, str) else wait_text
        self.page.wait_for_function(
            """(texts) => document.body
                 && texts.every(t => document.body.innerText.includes(t))
                 && !document.querySelector(
                      '[class*=Spinner],[class*=spinner],[aria-busy=true]')""",
            arg=texts, timeout=timeout * 1000,
        )

    def metadata(self) -> dict[str, str]:
        """The page's metadata table: label -> the text of its value cell."""
        return self.page.evaluate(
            """() => {
              const out = {};
              for (const row of document.querySelectorAll('tr')) {
                const cells = row.querySelectorAll(':scope > td');
                if (cells.length < 2) continue;
                const label = cells[0].innerText.trim();
                if (label && !(label in out)) out[label] = cells[1].innerText.trim();
              }
              return out;
            }"""
        )

    def open_job(self, key: str) -> dict[str, str]:
        """The `attribution` asset's page of one job partition; its metadata."""
        self.goto(f"/assets/attribution?view=partitions&partition={quote(key, safe='')}",
                  [key, "look first at"])
        return self.metadata()

    def open_report(self, key: str = REPORT_KEY) -> None:
        self.goto(f"/assets/weekly_report?view=partitions&partition={quote(key, safe='')}",
                  ["report", "GPU-hours lost"])

    def show_markdown(self, label: str) -> None:
        """Open the `[Show Markdown]` dialog of one metadata entry."""
        row = self.page.locator("tr", has=self.page.locator("td", has_text=label)).filter(
            has_text="Show"
        ).first
        row.get_by_text("Show", exact=False).first.click()
        self.page.wait_for_selector(".bp5-dialog, .bp4-dialog, [role=dialog]")

    def dialog_images(self) -> list[dict[str, Any]]:
        """Every image of the open dialog once loaded: its natural size and alt text."""
        self.page.wait_for_function(
            """() => { const d = document.querySelector('.bp5-dialog, .bp4-dialog, [role=dialog]');
                       const imgs = d ? [...d.querySelectorAll('img')] : [];
                       return imgs.length > 0 && imgs.every(i => i.complete); }""",
            timeout=30_000,
        )
        return self.page.evaluate(
            """() => [...document.querySelector('.bp5-dialog, .bp4-dialog, [role=dialog]')
                        .querySelectorAll('img')]
                     .map(i => ({w: i.naturalWidth, h: i.naturalHeight, alt: i.alt}))"""
        )


@contextmanager
def ui_session(work: Path, *, width: int = 1600, height: int = 1000) -> Iterator[UiSession]:
    """The webserver over `work` (prepared), and headless Chromium on it."""
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    port = free_port()
    log = open(work / "webserver.log", "wb")
    proc = subprocess.Popen(
        [str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
         "-w", str(REPO / "workspace.yaml")],
        cwd=REPO, env=_env(work), stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    session = UiSession(work, base=f"http://127.0.0.1:{port}")
    try:
        _wait_for_location(proc, session.base, work)
        _post(f"{session.base}/graphql", "mutation { setNuxSeen }")  # no welcome dialog
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=chromium, headless=True,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
            )
            try:
                session.page = browser.new_page(viewport={"width": width, "height": height})
                yield session
            finally:
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def _wait_for_location(proc: subprocess.Popen, base: str, work: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise RuntimeError((work / "webserver.log").read_text()[-3000:])
        try:
            data = _post(f"{base}/graphql", LOCATION)["data"]
            entries = data["workspaceOrError"]["locationEntries"]
            loaded = entries and entries[0]["locationOrLoadError"]
            if loaded:
                if loaded["__typename"] != "RepositoryLocation":
                    raise RuntimeError(f"code location failed to load: {loaded}")
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("dagster-webserver did not load the code location in 120 s")
        time.sleep(0.3)


SCREENS = {
    "asset-graph.png": "the per-job assets, every job materialized",
    "attribution-partition.png": "one job: the verdict and where to look first, then the chain",
    "verdict-check.png": "verdict_needs_no_look per job: the ones needing a look are marked",
    "weekly-report.png": "the weekly report with its split accounting and charts",
}


def screenshots(out: Path, work: Path) -> list[Path]:
    """The README's screens (SCREENS), in that order."""
    out.mkdir(parents=True, exist_ok=True)
    names = iter(SCREENS)
    written = []
    with ui_session(work, height=900) as ui:
        ui.goto("/locations/attribution_dagster/asset-groups/attribution",
                ["execution_context", "raw_evidence", "observations"])
        ui.page.wait_for_timeout(1500)  # the graph lays itself out after the data arrives
        written.append(_shot(ui, out / next(names)))
        ui.page.set_viewport_size({"width": 1600, "height": 1150})
        ui.open_job(SHOW_KEY)
        written.append(_shot(ui, out / next(names)))
        ui.page.set_viewport_size({"width": 1600, "height": 700})
        ui.goto("/assets/attribution?view=checks&checkDetail=verdict_needs_no_look",
                ["verdict_needs_no_look", "Partitions"])
        ui.page.get_by_text("Partitions", exact=True).last.click()
        ui.page.wait_for_selector("text=Passed (", timeout=60_000)
        written.append(_shot(ui, out / next(names)))
        ui.page.set_viewport_size({"width": 1600, "height": 1300})
        ui.open_report()
        ui.show_markdown("report")
        ui.dialog_images()
        written.append(_shot(ui, out / next(names)))
    return written


def _shot(ui: UiSession, path: Path) -> Path:
    ui.page.wait_for_timeout(800)  # fonts, transitions
    ui.page.screenshot(path=str(path))
    return path


def main(argv: list[str]) -> int:
    if argv[:1] == ["--prepare"]:
        _prepare_child(Path(argv[1]))
        return 0
    import tempfile

    out = Path(argv[0] if argv else REPO / "docs" / "screens")
    try:
        find_chromium()
    except NoBrowser as e:
        print(f"screenshots: {e}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="attribution-screens-") as tmp:
        work = Path(tmp)
        prepare(work)
        for p in screenshots(out, work):
            print(f"screenshots: wrote {p.relative_to(REPO) if p.is_relative_to(REPO) else p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env bash
# One screenshot of any Dagster UI page, by headless Chromium (screenshot.png by default;
# the README's screens are `make screenshots`, scripts/ui_screens.py).
#
#   scripts/screenshot.sh [OUT.png]
#   SCREENSHOT_PATH="/assets/attribution?view=partitions&partition=<key>" scripts/screenshot.sh docs/x.png
#
# Starts dagster-webserver on a free loopback port with a throwaway DAGSTER_HOME in which
# the bundled samples were attributed (so the graph shows materialized partitions), takes
# the screenshot, and stops what it started. Needs `chromium` (apt-get install -y chromium).
#
# Chromium is driven over its DevTools pipe (stdlib Python, no extra packages): the shot is
# taken once the page shows SCREENSHOT_WAIT_TEXT and no spinner / loading skeleton is left,
# not after a fixed time budget (the UI loads its data after the first paint). Options:
#   SCREENSHOT_SIZE=WxH          viewport (default 1600x900; 1600x1200 for a partition page,
#                                so its whole metadata table fits)
#   SCREENSHOT_WAIT_TEXT=a|b     wait until all these texts show (default: the partition
#                                key and its metadata, or the first asset of the graph)
#   SCREENSHOT_EXPAND=label      open the "[Show Markdown]" dialog of that metadata entry,
#                                e.g. "symptom chain" (off by default: it covers the page)
#   SCREENSHOT_TIMEOUT=seconds   how long to wait for the page (default 90)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-screenshot.png}
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
VENV_BIN=${VENV_BIN:-.venv/bin}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || { echo "screenshot: chromium not found (apt-get install -y chromium)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/attribution-screenshot.XXXXXX)
PID=""
cleanup() {
  if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then
    kill "$PID"; for _ in $(seq 1 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

export DAGSTER_HOME="$WORK/home" ATTRIBUTION_SINK_URL="sqlite:///$WORK/results.db"
export ATTRIBUTION_CASE_ROOT="${CASES:-$PWD/samples}" ATTRIBUTION_SENSOR_ENABLED=0
mkdir -p "$DAGSTER_HOME"

# Attribute the samples into this instance, so partitions show as materialized.
"$VENV_BIN/python" - <<PY
from pathlib import Path
import os
from attribution_dagster.cli.local_run import run_cases_report
r = run_cases_report(Path(os.environ["ATTRIBUTION_CASE_ROOT"]), os.environ["ATTRIBUTION_SINK_URL"],
                     instance_dir=Path(os.environ["DAGSTER_HOME"]))
print(f"screenshot: {len(r.results)} jobs attributed into the instance")
PY

PORT=$("$VENV_BIN/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$VENV_BIN/dagster-webserver" -h 127.0.0.1 -p "$PORT" -w workspace.yaml </dev/null >"$WORK/webserver.log" 2>&1 &
PID=$!
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$PORT/server_info" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { tail -30 "$WORK/webserver.log" >&2; exit 1; }
  sleep 0.5
done

# The UI greets a new local instance with a community dialog; mark it seen.
curl -sf -X POST -H 'Content-Type: application/json' --data '{"query":"mutation { setNuxSeen }"}' \
  "http://127.0.0.1:$PORT/graphql" >/dev/null
SCREENSHOT_PATH=${SCREENSHOT_PATH:-/locations/attribution_dagster/asset-groups/attribution}
URL="http://127.0.0.1:$PORT$SCREENSHOT_PATH"
case "$SCREENSHOT_PATH" in
  *partition=*)
    KEY=${SCREENSHOT_PATH##*partition=}; KEY=${KEY%%&*}
    export SCREENSHOT_SIZE=${SCREENSHOT_SIZE:-1600x1200}
    # The metadata table of that partition, not just its name in the partition list.
    export SCREENSHOT_WAIT_TEXT=${SCREENSHOT_WAIT_TEXT:-$KEY|Latest materialization|Metadata} ;;
  *) export SCREENSHOT_WAIT_TEXT=${SCREENSHOT_WAIT_TEXT:-execution_context} ;;
esac
mkdir -p "$WORK/chromium" "$(dirname "$OUT")"
cat >"$WORK/shot.py" <<'PY'
"""Drive headless Chromium over the DevTools pipe (stdlib only): load URL, wait, expand, shoot."""
import base64, json, os, subprocess, sys, time

chromium, url, out, user_dir = sys.argv[1:5]
width, height = (int(x) for x in os.environ.get("SCREENSHOT_SIZE", "1600x900").split("x"))
wait_text = os.environ.get("SCREENSHOT_WAIT_TEXT", "")
expand = os.environ.get("SCREENSHOT_EXPAND", "")
timeout = float(os.environ.get("SCREENSHOT_TIMEOUT", "90"))

# Pipes on fds 3 (commands to Chromium) and 4 (replies), as --remote-debugging-pipe expects.
to_r, to_w = os.pipe()
from_r, from_w = os.pipe()
hi = [os.dup2(fd, 20 + i) for i, fd in enumerate((to_r, from_w))]
def child():
    os.dup2(20, 3); os.dup2(21, 4)
log = open(os.path.join(user_dir, "..", "chromium.log"), "w")
proc = subprocess.Popen(
    [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
     "--disable-background-networking", "--disable-component-update", "--disable-sync",
     "--hide-scrollbars", f"--user-data-dir={user_dir}", f"--window-size={width},{height}",
     "--remote-debugging-pipe", "about:blank"],
    stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(3, 4, 20, 21), preexec_fn=child,
    start_new_session=True)
for fd in (to_r, from_w, 20, 21):
    os.close(fd)
wf, rf = os.fdopen(to_w, "wb", buffering=0), os.fdopen(from_r, "rb", buffering=0)
buf, seq = b"", 0

def chromium_died():
    log.flush()
    with open(log.name, errors="replace") as f:
        tail = [x for x in f.read().splitlines() if "dbus" not in x][-20:]
    raise SystemExit("\n".join(tail + [f"screenshot: {chromium} exited (DevTools pipe closed)"]))

def call(method, session=None, **params):
    global buf, seq
    seq += 1
    msg = {"id": seq, "method": method, "params": params}
    if session:
        msg["sessionId"] = session
    try:
        wf.write(json.dumps(msg).encode() + b"\0")
    except BrokenPipeError:
        chromium_died()
    while True:
        while b"\0" not in buf:
            chunk = rf.read(1 << 20)
            if not chunk:
                chromium_died()
            buf += chunk
        raw, buf = buf.split(b"\0", 1)
        reply = json.loads(raw)
        if reply.get("id") == seq:
            if "error" in reply:
                raise SystemExit(f"screenshot: {method}: {reply['error']}")
            return reply["result"]

def js(session, expr):
    r = call("Runtime.evaluate", session, expression=expr, returnByValue=True, awaitPromise=True)
    return r.get("result", {}).get("value")

def wait_for(session, expr, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if js(session, expr):
            return
        time.sleep(0.25)
    raise SystemExit(f"screenshot: timed out after {timeout:.0f}s waiting for {what} on {url}")

try:
    target = call("Target.createTarget", url="about:blank")["targetId"]
    s = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    call("Emulation.setDeviceMetricsOverride", s, width=width, height=height,
         deviceScaleFactor=1, mobile=False)
    call("Page.enable", s)
    call("Page.navigate", s, url=url)
    # Loaded = the text we need is on the page and no spinner / loading skeleton is left.
    quiet = ("!document.querySelector('[class*=Spinner],[class*=spinner],[class*=Skeleton],"
             "[class*=skeleton],[aria-busy=true]')")
    texts = [t for t in wait_text.split("|") if t]  # all of them must be on the page
    need = " && ".join(f"document.body.innerText.includes({json.dumps(t)})" for t in texts) or "true"
    wait_for(s, f"!!document.body && {need} && {quiet}", " and ".join(map(repr, texts)) or "the page")
    if expand:
        # Open the "[Show Markdown]" / "[Show Table]" dialog of one metadata entry.
        label = json.dumps(expand)
        clicked = js(s, f"""(() => {{
          for (const row of document.querySelectorAll('tr')) {{
            const cells = row.querySelectorAll('td');
            if (cells.length < 2 || cells[0].innerText.trim() !== {label}) continue;
            const a = [...row.querySelectorAll('*')].find(e => /^\\[Show /.test(e.innerText.trim())
                        && !e.children.length);
            if (a) {{ a.click(); return true; }}
          }}
          return false; }})()""")
        if not clicked:
            raise SystemExit(f"screenshot: no expandable metadata entry {expand!r} on {url}")
        wait_for(s, "!!document.querySelector('.bp5-dialog, .bp4-dialog, [role=dialog]')",
                 "the metadata dialog")
    time.sleep(float(os.environ.get("SCREENSHOT_SETTLE", "1.5")))  # fonts, layout, transitions
    png = call("Page.captureScreenshot", s, format="png")["data"]
    with open(out, "wb") as f:
        f.write(base64.b64decode(png))
finally:
    try:
        call("Browser.close")
    except BaseException:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
PY
"$VENV_BIN/python" "$WORK/shot.py" "$CHROMIUM" "$URL" "$OUT" "$WORK/chromium"
echo "screenshot: wrote ${OUT#"$PWD/"} from $URL"

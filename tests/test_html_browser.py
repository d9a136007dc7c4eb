"""The HTML report in a real browser: headless Chromium, network off, driven over the DevTools protocol.

Chromium comes from the distribution (``scripts/install-chromium.sh``: ``apt-get install chromium``); the
tests skip, saying so, when it is absent. The DevTools client below talks to Chromium over
``--remote-debugging-pipe`` (file descriptors 3 and 4, NUL-separated JSON), so it needs nothing beyond the
standard library — no Playwright, no websocket package, no browser download.

Run as a script to take the documentation screenshots (a laptop's and a phone's width)::

    .venv/bin/python tests/test_html_browser.py examples/tp8-shortfall/serve.log --out docs/images/report-1280.png
    .venv/bin/python tests/test_html_browser.py examples/tp8-shortfall/serve.log --out docs/images/report-390.png \
        --width 390 --height 1688
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

CORPUS = Path(os.environ.get("SPECDIAG_CORPUS", str(Path(__file__).resolve().parent / "corpus")))
EVIL_SCRIPT = "<script>alert(1)</script>"
EVIL_IMG = '"><img src=x onerror=alert(1)>'

FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--no-default-browser-check", "--mute-audio",
    "--disable-features=MediaRouter,OptimizationHints,Translate,AutofillServerCommunication",
    # belt and braces: any connection that does get attempted goes to a dead proxy
    "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
    "--hide-scrollbars", "--force-device-scale-factor=1",
]


def find_chromium() -> str | None:
    env = os.environ.get("SPECDIAG_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        p = shutil.which(name)
        if p:
            return p
    return None


class Browser:
    """A minimal Chrome DevTools protocol client over ``--remote-debugging-pipe``."""

    def __init__(self, exe: str, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self.udd = tempfile.mkdtemp(prefix="specdiag-chromium-")
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # high copies (so dup2 onto 3 and 4 cannot clobber them), moved onto fds 3 and 4 just before exec
        child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 20)
        child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 20)
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def preexec() -> None:  # runs in the child
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        self.proc = subprocess.Popen(
            [exe, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={self.udd}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            # close_fds=False: Python's own descriptors are non-inheritable anyway, and closing would also
            # close 3 and 4 after preexec_fn has put the pipes there
            close_fds=False, preexec_fn=preexec, env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": ""},
        )
        os.close(child_r)
        os.close(child_w)
        self._w = to_chrome_w
        self._r = from_chrome_r
        self._next = 0
        self._q: queue.Queue = queue.Queue()
        self.events: list[dict[str, Any]] = []
        self.targets: dict[str, str] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._r, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self._q.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self._q.put(json.loads(msg))

    def _pump(self, until: float) -> dict[str, Any] | None:
        try:
            msg = self._q.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            return None
        if msg is None:
            raise RuntimeError("Chromium closed the DevTools pipe")
        return msg

    def _on_event(self, msg: dict[str, Any]) -> None:
        self.events.append(msg)
        if msg.get("method") == "Page.javascriptDialogOpening" and msg.get("sessionId"):
            # never leave a dialog blocking the page; the test fails on the recorded event anyway
            self.send("Page.handleJavaScriptDialog", {"accept": True}, session=msg["sessionId"], wait=False)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             wait: bool = True) -> dict[str, Any]:
        self._next += 1
        mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        if not wait:
            return {}
        until = time.monotonic() + self.timeout
        while time.monotonic() < until:
            m = self._pump(until)
            if m is None:
                break
            if m.get("id") == mid:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            if "method" in m:
                self._on_event(m)
        raise TimeoutError(method)

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict[str, Any]:
        for m in self.events:
            if m.get("method") == method and m.get("sessionId") == session and not m.get("_seen"):
                m["_seen"] = True
                return m
        until = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < until:
            m = self._pump(until)
            if m is None:
                break
            if "method" in m:
                self._on_event(m)
                if m["method"] == method and m.get("sessionId") == session:
                    m["_seen"] = True
                    return m
        raise TimeoutError(method)

    def settle(self, seconds: float) -> None:
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            m = self._pump(until)
            if m is not None and "method" in m:
                self._on_event(m)

    def open_page(self, width: int = 1280, height: int = 900) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.targets[session] = target
        for method in ("Page.enable", "Runtime.enable", "Log.enable", "Network.enable"):
            self.send(method, session=session)
        self.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                       "uploadThroughput": -1}, session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        # injected by the debugger, so it is not subject to the page's CSP: records CSP violations
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": (
            "window.__csp = []; document.addEventListener('securitypolicyviolation', "
            "e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));")}, session=session)
        self.send("Page.addScriptToEvaluateOnNewDocument", {"source": TEXT_RECORDER}, session=session)
        return session

    def load(self, session: str, url: str) -> None:
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session)
        self.settle(0.3)

    def evaluate(self, session: str, expr: str) -> Any:
        r = self.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                      session=session)
        if "exceptionDetails" in r:
            raise RuntimeError(f"evaluate failed: {r['exceptionDetails']}")
        return r["result"].get("value")

    def screenshot(self, session: str, path: Path, width: int = 1280, max_height: int = 4000, top: int = 0) -> None:
        import base64

        h = int(self.evaluate(session, "document.documentElement.scrollHeight"))
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": h, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.settle(0.5)
        clip = {"x": 0, "y": top, "width": width, "height": max(1, min(h - top, max_height)), "scale": 1}
        png = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True},
                        session=session)["data"]
        path.write_bytes(base64.b64decode(png))

    def close(self) -> None:
        try:
            self.send("Browser.close", wait=False)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for fd in (self._w, self._r):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.udd, ignore_errors=True)


# The charts are canvases, so their labels are not elements: this records the box of every string drawn with
# fillText (measured by the canvas itself, through the context's transform, so rotated axis titles too), per
# canvas, from the canvas's last full clear on — what is on the canvas now. Injected before any page script.
TEXT_RECORDER = r"""
(() => {
  const P = CanvasRenderingContext2D.prototype, fill = P.fillText, clear = P.clearRect;
  const drawn = new WeakMap();
  window.__drawnText = c => drawn.get(c) || [];
  P.clearRect = function (x, y, w, h) {
    if (x <= 0 && y <= 0 && x + w >= this.canvas.width && y + h >= this.canvas.height) { drawn.set(this.canvas, []); }
    return clear.apply(this, arguments);
  };
  P.fillText = function (s, x, y) {
    const text = String(s);
    if (text.trim()) {
      const m = this.measureText(text), t = this.getTransform();
      const l = x - m.actualBoundingBoxLeft, r = x + m.actualBoundingBoxRight;
      const top = y - m.actualBoundingBoxAscent, bot = y + m.actualBoundingBoxDescent;
      const pts = [[l, top], [r, top], [l, bot], [r, bot]].map(([px, py]) => [t.a * px + t.c * py + t.e,
                                                                            t.b * px + t.d * py + t.f]);
      const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
      if (!drawn.has(this.canvas)) { drawn.set(this.canvas, []); }
      drawn.get(this.canvas).push({text, x0: Math.min(...xs), x1: Math.max(...xs),
                                   y0: Math.min(...ys), y1: Math.max(...ys)});
    }
    return fill.apply(this, arguments);
  };
})();
"""

# resolves once the page's script has finished (it marks <body data-charts>) and two frames were painted
CHARTS_READY = r"""
new Promise(resolve => {
  const t0 = performance.now();
  const done = () => requestAnimationFrame(() => requestAnimationFrame(() => resolve(true)));
  (function poll() {
    const ours = document.getElementById('specdiag-data') && document.querySelector('script:not([type])');
    if (!ours || document.body.dataset.charts !== undefined
        || performance.now() - t0 > 10000) { done(); } else { setTimeout(poll, 50); }
  })();
})
"""

# what the page must look like once loaded: returned as one JSON-able object
PAGE_PROBE = r"""
(() => {
  const canvases = [];
  document.querySelectorAll('#charts .chart').forEach(ch => {
    const c = ch.querySelector('canvas');
    let colored = 0, painted = 0;
    if (c) {
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] === 0) continue;
        painted++;
        const mx = Math.max(d[i], d[i + 1], d[i + 2]), mn = Math.min(d[i], d[i + 1], d[i + 2]);
        if (mx - mn > 60) colored++;
      }
    }
    canvases.push({title: ch.querySelector('h3').textContent, width: c ? c.width : 0,
                   height: c ? c.height : 0, painted, colored});
  });
  let data = null;
  try { data = JSON.parse(document.getElementById('specdiag-data').textContent); } catch (e) {}
  return {
    charts: canvases,
    expected_charts: data && data.charts ? data.charts.groups.length + (data.charts.markers.length ? 1 : 0) : 0,
    text: document.body.innerText,
    imgs: document.querySelectorAll('img').length,
    scripts: document.querySelectorAll('script').length,
    exec_scripts: document.querySelectorAll('script:not([type="application/json"])').length,
    csp: window.__csp || [],
    pwned: window.__pwned || null,
  };
})()
"""


def check_page(b: Browser, html_path: Path) -> dict[str, Any]:
    """Open the file and return the probe plus every problem seen (console, requests, dialogs, CSP)."""
    session = b.open_page()
    first = len(b.events)
    url = html_path.resolve().as_uri()
    b.load(session, url)
    b.evaluate(session, CHARTS_READY)
    probe = b.evaluate(session, PAGE_PROBE)
    evs = [e for e in b.events[first:] if e.get("sessionId") == session]
    problems = []
    for e in evs:
        m, p = e["method"], e.get("params", {})
        if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
            problems.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p.get('args', [])]}")
        elif m == "Runtime.exceptionThrown":
            problems.append(f"exception: {p.get('exceptionDetails', {}).get('text')} "
                            f"{p.get('exceptionDetails', {}).get('exception', {}).get('description')}")
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
            problems.append(f"log {p['entry']['level']}: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        elif m == "Network.requestWillBeSent" and p.get("request", {}).get("url") != url:
            problems.append(f"request: {p['request']['url']}")
        elif m == "Network.loadingFailed":
            problems.append(f"loading failed: {p.get('errorText')}")
        elif m == "Page.javascriptDialogOpening":
            problems.append(f"dialog: {p.get('type')} {p.get('message')!r}")
    problems += [f"CSP violation: {v}" for v in probe["csp"]]
    b.send("Target.closeTarget", {"targetId": b.targets.pop(session)})
    probe["problems"] = problems
    return probe


# how the page sits in the viewport: what sticks out, where the verdict is, each chart's labels and legend
LAYOUT_PROBE = r"""
(() => {
  const W = innerWidth;
  const scrolls = e => { const o = getComputedStyle(e).overflowX; return o === 'auto' || o === 'scroll'; };
  const inScrollBox = e => { for (let a = e.parentElement; a; a = a.parentElement) { if (scrolls(a)) return true; }
                             return false; };
  const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
                    (typeof e.className === 'string' && e.className ? '.' + e.className.trim().split(/\s+/).join('.') : '');
  const overflow = [];
  document.querySelectorAll('body *').forEach(e => {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && r.right > W + 0.5 && !inScrollBox(e)) {
      overflow.push(name(e) + ' ends at ' + Math.round(r.right) + ': ' + (e.textContent || '').trim().slice(0, 60));
    }
  });
  const verdict = document.querySelector('#verdict, .verdict');
  const charts = [];
  document.querySelectorAll('#charts .uplot').forEach(u => {
    const canvas = u.querySelector('canvas'), wrap = u.querySelector('.u-wrap'), legend = u.querySelector('.u-legend');
    const k = canvas ? canvas.width / canvas.getBoundingClientRect().width : 1;
    const boxes = canvas ? window.__drawnText(canvas).map(b => ({text: b.text, x0: b.x0 / k, x1: b.x1 / k,
                                                                  y0: b.y0 / k, y1: b.y1 / k})) : [];
    const overlaps = [];
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i], b = boxes[j];
        if (Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0) > 0.5 && Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0) > 0.5) {
          overlaps.push([a.text, b.text]);
        }
      }
    }
    const h3 = u.closest('.chart') && u.closest('.chart').querySelector('h3');
    charts.push({title: h3 ? h3.textContent : '', labels: boxes.length, overlaps,
                 chart_height: wrap ? wrap.getBoundingClientRect().height : 0,
                 legend_height: legend ? legend.getBoundingClientRect().height : 0});
  });
  return {inner_width: W, inner_height: innerHeight, scroll_width: document.documentElement.scrollWidth,
          overflow, verdict_top: verdict ? verdict.getBoundingClientRect().top : null, charts};
})()
"""


def layout_of(b: Browser, html_path: Path, width: int, height: int) -> dict[str, Any]:
    """Open the page at width × height (a phone, a laptop) and measure how it sits in that viewport."""
    session = b.open_page(width, height)
    b.load(session, html_path.resolve().as_uri())
    b.evaluate(session, CHARTS_READY)
    probe = b.evaluate(session, LAYOUT_PROBE)
    b.send("Target.closeTarget", {"targetId": b.targets.pop(session)})
    return probe


def layout_problems(probe: dict[str, Any], verdict: bool = True) -> list[str]:
    """Everything that makes the page hard to read at that size, one line each ([] when it reads well)."""
    w, h = probe["inner_width"], probe["inner_height"]
    out = []
    if probe["scroll_width"] > w:
        out.append(f"the page scrolls sideways: {probe['scroll_width']} px wide in a {w} px viewport")
    out += [f"past the right edge, outside any scroll box: {o}" for o in probe["overflow"][:10]]
    if verdict and (probe["verdict_top"] is None or probe["verdict_top"] >= h):
        out.append(f"the verdict is not on the first screen (top at {probe['verdict_top']}, screen {h} px)")
    for ch in probe["charts"]:
        out += [f"chart {ch['title']!r}: labels {a!r} and {b!r} overlap" for a, b in ch["overlaps"]]
        if ch["legend_height"] > ch["chart_height"] + 0.5:
            out.append(f"chart {ch['title']!r}: legend {ch['legend_height']:.0f} px taller than its chart "
                       f"({ch['chart_height']:.0f} px)")
    return out


SIZES = [(390, 844), (1280, 900)]  # a phone held upright, a laptop


# --------------------------------------------------------------------------------------------------- tests
CHROMIUM = find_chromium()
NO_CHROMIUM = "Chromium not installed (run scripts/install-chromium.sh: apt-get install chromium)"
# CI sets SPECDIAG_REQUIRE_CHROMIUM=1 after installing it, so that a missing browser fails instead of skipping
REQUIRED = os.environ.get("SPECDIAG_REQUIRE_CHROMIUM", "") not in ("", "0")
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not REQUIRED, reason=NO_CHROMIUM)


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.fail(NO_CHROMIUM + "; SPECDIAG_REQUIRE_CHROMIUM is set")
    b = Browser(CHROMIUM)
    try:
        yield b
    finally:
        b.close()


def _corpus_logs() -> list[Path]:
    names = ["tp4-cpu-eviction-vllm011/vllm.log", "spec-zero-acceptance-kv-consumer/decode.log",
             "real-cpu-redis-flushall-shortfall/vllm.log", "clean-healthy-ngram-tp2/vllm.log"]
    return [CORPUS / n for n in names if (CORPUS / n).exists()]


def _evil_log(tmp: Path) -> Path:
    """A corpus log whose evidence lines and an unrecognised warning carry markup and script."""
    src = CORPUS / "tp4-cpu-eviction-vllm011" / "vllm.log"
    lines = src.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    out = []
    for ln in lines:
        if "The number of retrieved tokens is less than the expected" in ln or "Local cpu memory under pressure" in ln:
            ln = ln.rstrip("\n") + f" {EVIL_SCRIPT} {EVIL_IMG}\n"
        out.append(ln)
    out.append(f"(APIServer pid=1) WARNING 10-21 09:19:00 [x.py:1] weird {EVIL_SCRIPT} {EVIL_IMG} line\n")
    p = tmp / "evil.log"
    p.write_text("".join(out), encoding="utf-8")
    return p


@needs_chromium
def test_corpus_reports_in_chromium(browser, tmp_path):
    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    logs = _corpus_logs()
    if not logs:
        pytest.skip(f"corpus not found at {CORPUS}")
    drawn = 0
    for log in logs:
        out = tmp_path / (log.parent.name + ".html")
        write_html(analyze([str(log)]), out)
        probe = check_page(browser, out)
        assert probe["problems"] == [], (log, probe["problems"])
        assert len(probe["charts"]) == probe["expected_charts"], (log, probe["charts"])
        for ch in probe["charts"]:
            assert ch["width"] > 300 and ch["height"] > 50, (log, ch)
            assert ch["colored"] > 30, (log, ch)  # series lines or event dots, not just axes and grid
        drawn += len(probe["charts"])
        assert "specdiag incident report" in probe["text"]
    assert drawn > 0, "no corpus report drew a chart"


@needs_chromium
def test_synthetic_timeline_draws_every_chart(browser, tmp_path):
    from test_html import rich_report

    from specdiag.report.html import write_html

    out = tmp_path / "synthetic.html"
    write_html(rich_report(), out)
    probe = check_page(browser, out)
    assert probe["problems"] == []
    titles = [c["title"] for c in probe["charts"]]
    assert len(titles) == probe["expected_charts"] >= 6, titles
    assert any("acceptance" in t for t in titles) and any("Events" in t for t in titles)
    for ch in probe["charts"]:
        assert ch["colored"] > 100, ch


@needs_chromium
def test_log_markup_shows_as_text_and_runs_nothing(browser, tmp_path):
    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    if not (CORPUS / "tp4-cpu-eviction-vllm011" / "vllm.log").exists():
        pytest.skip(f"corpus not found at {CORPUS}")
    report = analyze([str(_evil_log(tmp_path))])
    out = tmp_path / "evil.html"
    write_html(report, out)
    probe = check_page(browser, out)
    assert probe["problems"] == []  # no dialog, no request for "x", no console error, no CSP violation
    assert EVIL_SCRIPT in probe["text"]
    assert EVIL_IMG in probe["text"]
    assert probe["imgs"] == 0
    assert probe["exec_scripts"] == 2  # uPlot and the report's own script, nothing else


@needs_chromium
def test_harness_sees_what_it_must_catch(browser, tmp_path):
    """The checks are not blind: unescaped markup shows up as a dialog, a request, a console error, a CSP hit."""
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!DOCTYPE html><html><body>{EVIL_IMG}{EVIL_SCRIPT}"
                   "<script>console.error('boom')</script></body></html>", encoding="utf-8")
    probs = check_page(browser, raw)["problems"]
    assert any(p.startswith("dialog:") for p in probs), probs
    assert any(p.startswith("request:") and p.endswith("/x") for p in probs), probs
    assert any(p.startswith("console.error") for p in probs), probs

    from test_html import rich_report

    from specdiag.report.html import render_html

    # our page's own script may not turn a string into markup (Trusted Types): a sink throws
    tt = tmp_path / "tt.html"
    tt.write_text(render_html(rich_report()), encoding="utf-8")
    session = browser.open_page()
    browser.load(session, tt.resolve().as_uri())
    err = browser.evaluate(session, "(() => { try { document.body.innerHTML = '<i>x</i>'; return 'assigned'; }"
                                    " catch (e) { return e.name; } })()")
    assert err == "TypeError", err
    browser.send("Target.closeTarget", {"targetId": browser.targets.pop(session)})

    # a script smuggled into our page past the escaping would still be refused by the CSP
    page = render_html(rich_report()).replace("<main>", f"<main>{EVIL_SCRIPT}{EVIL_IMG}", 1)
    ours = tmp_path / "smuggled.html"
    ours.write_text(page, encoding="utf-8")
    probs = check_page(browser, ours)["problems"]
    assert not any(p.startswith("dialog:") for p in probs), probs
    assert any("script-src" in p for p in probs) and any("img-src" in p for p in probs), probs


@needs_chromium
def test_repro_page_in_chromium(browser, tmp_path):
    from test_html import sample_verdict

    from specdiag.report.html import write_repro_html

    out = tmp_path / "repro.html"
    v = sample_verdict()
    v["conclusions"].append(f"note {EVIL_SCRIPT} {EVIL_IMG}")
    write_repro_html(v, out)
    probe = check_page(browser, out)
    assert probe["problems"] == []
    assert EVIL_SCRIPT in probe["text"] and EVIL_IMG in probe["text"]
    assert probe["imgs"] == 0 and probe["exec_scripts"] == 0
    assert "max_local_cpu_size" in probe["text"]


EXAMPLES = sorted((ROOT / "examples").glob("*/serve.log"))


@pytest.fixture(params=SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def size(request) -> tuple[int, int]:
    return request.param


def _problems_at(b: Browser, page: Path, size: tuple[int, int], verdict: bool = True) -> list[str]:
    return layout_problems(layout_of(b, page, *size), verdict=verdict)


@needs_chromium
def test_example_reports_read_well_on_a_phone_and_a_laptop(browser, tmp_path, size):
    """Every example's report: no sideways scrolling, nothing cut at the right edge outside a scroll box, the
    verdict on the first screen, no chart label over another, no legend taller than its chart."""
    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    assert EXAMPLES, "no examples/*/serve.log"
    for log in EXAMPLES:
        out = tmp_path / f"{log.parent.name}.html"
        write_html(analyze([str(log)]), out)
        probe = layout_of(browser, out, *size)
        probs = layout_problems(probe)
        assert not probs, f"{log.parent.name} at {size[0]} px:\n" + "\n".join(probs)
        assert probe["charts"] and all(ch["labels"] > 3 for ch in probe["charts"]), probe["charts"]


@needs_chromium
def test_every_series_and_a_verbose_report_fit_the_screen(browser, tmp_path, size):
    """The synthetic report draws every chart (the most legend entries) and -v shows every cause in full."""
    from test_html import rich_report

    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    write_html(rich_report(), tmp_path / "rich.html")
    assert _problems_at(browser, tmp_path / "rich.html", size) == []
    tp8 = analyze([str(ROOT / "examples" / "tp8-shortfall" / "serve.log")])
    write_html(tp8, tmp_path / "verbose.html", verbose=True)
    assert _problems_at(browser, tmp_path / "verbose.html", size) == []


def _fleet_of_the_examples() -> str:
    """The fleet page with one deployment per example, under a pod name as long as Kubernetes makes them."""
    from specdiag.engine import analyze
    from specdiag.fleet.model import FleetReport, FleetRow
    from specdiag.report.fleet_html import render_fleet_html

    rows = []
    for log in EXAMPLES:
        rep = analyze([str(log)])
        rows.append(FleetRow(f"pod/vllm-{log.parent.name}-decode-5d8f7c9b6-x2kqz", [str(log)], rep.context,
                             list(rep.findings)))
    return render_fleet_html(FleetReport(rows, []))


@needs_chromium
def test_repro_and_fleet_pages_fit_the_screen(browser, tmp_path, size):
    from test_html import sample_verdict

    from specdiag.report.html import write_repro_html

    write_repro_html(sample_verdict(), tmp_path / "repro.html")
    assert _problems_at(browser, tmp_path / "repro.html", size) == []
    fleet = tmp_path / "fleet.html"
    fleet.write_text(_fleet_of_the_examples(), encoding="utf-8")
    assert _problems_at(browser, fleet, size, verdict=False) == []  # the fleet page opens with its count


BROKEN_LAYOUT = """<!DOCTYPE html><html><head><meta name="viewport" content="width=device-width"></head><body>
<table><tr><td style="white-space:nowrap">a value that cannot wrap, far wider than any phone: %s</td></tr></table>
<div class="scroll" style="overflow-x:auto"><div style="width:1800px">wide, but inside its own scroll box</div></div>
<div style="height:2000px"></div>
<section id="verdict">the verdict, two screens down</section>
<div id="charts"><div class="chart"><h3>lanes</h3><div class="uplot"><div class="u-wrap" style="height:80px">
<canvas width="300" height="80"></canvas></div><table class="u-legend" style="height:240px"><tr><td>x</td></tr>
</table></div></div></div>
<script>
const c = document.querySelector('canvas').getContext('2d');
c.font = '12px sans-serif';
c.clearRect(0, 0, 300, 80);
c.fillText('TP2', 10, 40); c.fillText('all', 14, 44); c.fillText('TP0', 10, 70);
</script></body></html>"""


@needs_chromium
def test_layout_checks_catch_a_broken_page(browser, tmp_path):
    """The layout checks are not blind: a page that scrolls sideways, a cell cut at the edge, the verdict two
    screens down, two labels drawn over each other and a legend taller than its chart are each reported — and a
    wide block inside a scroll box, or labels one lane apart, are not."""
    page = tmp_path / "broken.html"
    page.write_text(BROKEN_LAYOUT % ("x" * 300), encoding="utf-8")
    probe = layout_of(browser, page, 390, 844)
    probs = layout_problems(probe)
    assert any(p.startswith("the page scrolls sideways") for p in probs), probs
    assert any("past the right edge" in p and p.split(": ", 1)[1].startswith("td ") for p in probs), probs
    assert not any("inside its own scroll box" in p for p in probs), probs
    assert any("verdict is not on the first screen" in p for p in probs), probs
    assert [p for p in probs if "overlap" in p] == ["chart 'lanes': labels 'TP2' and 'all' overlap"], probs
    assert any("legend 240 px taller than its chart (80 px)" in p for p in probs), probs


# ------------------------------------------------------------------------------------------ screenshot
def main(argv: list[str]) -> int:
    import argparse

    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    ap = argparse.ArgumentParser(description="Render the HTML report of LOG(s) and screenshot it.")
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--html", help="also keep the HTML here")
    ap.add_argument("--width", type=int, default=1280, help="the viewport's width in CSS pixels (390: a phone)")
    ap.add_argument("--height", type=int, default=2600, help="the picture's height: the top of the page down to it")
    ap.add_argument("--top", type=int, default=0, help="start the picture this many pixels down the page")
    args = ap.parse_args(argv)
    exe = find_chromium()
    if not exe:
        print("Chromium not found (scripts/install-chromium.sh)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        html_path = Path(args.html or Path(d) / "report.html")
        write_html(analyze(args.logs), html_path)
        b = Browser(exe)
        try:
            probe = check_page(b, html_path)
            if probe["problems"]:
                print("\n".join(probe["problems"]), file=sys.stderr)
            session = b.open_page(args.width, 900)
            b.load(session, html_path.resolve().as_uri())
            b.evaluate(session, CHARTS_READY)
            b.screenshot(session, Path(args.out), width=args.width, max_height=args.height, top=args.top)
        finally:
            b.close()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


@needs_chromium
def test_a_log_without_a_year_shows_none_in_the_page(browser, tmp_path):
    """vLLM prints no year; a fragment without an LMCache line has none: its times sit on a stand-in year
    that must never be shown (first seen, the event list, axes and legends drawn by the script)."""
    from specdiag.engine import analyze
    from specdiag.report.html import write_html

    for name in ("frag-crash-no-header", "frag-spec-three-lines"):
        logs = sorted(str(p) for p in (ROOT / "tests" / "fragments" / name).glob("*.log"))
        out = tmp_path / f"{name}.html"
        write_html(analyze(logs), out)
        page = out.read_text(encoding="utf-8")
        probe = check_page(browser, out)
        assert probe["problems"] == [], (name, probe["problems"])
        legend = _hover_legend(browser, out)
        for stand_in in ("1972-", "1973-"):
            assert stand_in not in probe["text"] and stand_in not in page, (name, stand_in)
            assert stand_in not in legend, (name, legend)
    assert "10-" in legend or "11-" in legend, legend  # the script did print a time: month-day, no year


HOVER_LEGEND = r"""
(() => {
  const over = document.querySelector('#charts .u-over');
  if (!over) { return ''; }
  const r = over.getBoundingClientRect();
  over.dispatchEvent(new MouseEvent('mouseenter', {clientX: r.left + r.width / 2, clientY: r.top + r.height / 2}));
  over.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true}));
  return Array.from(document.querySelectorAll('#charts .u-legend')).map(e => e.innerText).join(' | ');
})()
"""


def _hover_legend(b: Browser, html_path: Path) -> str:
    """The charts' legends with the cursor over the middle of the first chart (their time is the script's)."""
    session = b.open_page()
    b.load(session, html_path.resolve().as_uri())
    b.evaluate(session, CHARTS_READY)
    text = b.evaluate(session, HOVER_LEGEND)
    b.send("Target.closeTarget", {"targetId": b.targets.pop(session)})
    return text or ""

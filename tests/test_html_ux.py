"""The HTML report's first screen and timeline as a reader sees them (headless Chromium where available,
the page model otherwise): the verdict on the first screen, findings before charts, visible gaps and K=0
bands, a colour-blind-safe palette, no time zone claimed, the dynamic-K schedule as a table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import test_html_browser
from test_html_browser import CHARTS_READY, needs_chromium

from specdiag.engine import analyze
from specdiag.report.html import KIND_COLORS, PALETTE, build_chart_data, render_html, with_gaps, write_html

browser = test_html_browser.browser  # the module-scoped Chromium fixture
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = str(ROOT / "examples/tp8-shortfall/serve.log")
DYNAMIC_K = str(ROOT / "examples/dynamic-k-stale-draft/serve.log")
OKABE_ITO = {"#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000", "#999999"}


def test_verdict_and_findings_come_before_the_charts() -> None:
    page = render_html(analyze([EXAMPLE]))
    v = page.index('id="verdict"')
    assert v < page.index('id="f-1"') < page.index('id="charts"')
    verdict = page[v:page.index("</section>", v)]
    assert "6144 tokens (24 × 256) missing on TP2, request failed" in verdict
    assert "pin-accounting-bug" in verdict


def test_why_not_save_decode_cache_is_visible_not_folded() -> None:
    page = render_html(analyze([EXAMPLE]))
    i = page.index("Why not save_decode_cache")
    opened = page.rfind("<details", 0, i)
    assert opened == -1 or page.rfind("</details>", 0, i) > opened


def test_palette_is_colour_blind_safe_and_no_zone_is_claimed() -> None:
    assert set(PALETTE) | set(KIND_COLORS.values()) <= OKABE_ITO
    page = render_html(analyze([EXAMPLE]))
    body = page.split("<footer>")[0]
    assert "UTC" not in re.sub(r'<script type="application/json".*?</script>', "", body, flags=re.S)
    assert "log time (zone unknown)" in page


def test_missing_intervals_break_the_line() -> None:
    pts = [[0.0, 1.0], [10.0, 1.0], [20.0, 1.0], [60.0, 1.0], [70.0, 1.0]]
    out, holes = with_gaps(pts)
    assert holes == [40.0] and [40.0, None] in out
    charts = build_chart_data(analyze([DYNAMIC_K]))
    acc = next(g for g in charts["groups"] if g["id"] == "acceptance")
    assert any(acc["holes"]), "K=0 stretches without SpecDecoding lines must show as gaps"
    assert charts["k0"] and all(a < b for a, b in charts["k0"])


def test_dynamic_k_schedule_is_a_table() -> None:
    page = render_html(analyze([DYNAMIC_K]))
    static = page.split('<script type="application/json"')[0]
    assert "schedule [[" not in static and "schedule=[[" not in static  # evidence may quote the log's own dict
    table = page[page.index('class="grid schedule"'):]
    table = table[:table.index("</table>")]
    assert "<td>2–64</td><td>0</td>" in table and "<td>1</td><td>3</td>" in table


@needs_chromium
def test_the_verdict_is_on_the_first_screen_in_chromium(browser, tmp_path) -> None:
    out = tmp_path / "r.html"
    write_html(analyze([EXAMPLE]), out)
    session = browser.open_page(width=1280, height=800)
    browser.load(session, out.resolve().as_uri())
    browser.evaluate(session, CHARTS_READY)
    pos = browser.evaluate(session, """(() => {
        const v = document.getElementById('verdict').getBoundingClientRect();
        const f = document.getElementById('f-1').getBoundingClientRect();
        const c = document.getElementById('charts').getBoundingClientRect();
        const w = document.querySelector('.whynot').getBoundingClientRect();
        return {vTop: v.top, vBottom: v.bottom, f: f.top, c: c.top, h: window.innerHeight,
                whyVisible: w.height > 0, text: document.getElementById('verdict').innerText};
    })()""")
    assert pos["vTop"] >= 0 and pos["vBottom"] <= pos["h"], pos
    assert "6144 tokens (24 × 256) missing on TP2" in pos["text"]
    assert pos["f"] < pos["c"] and pos["f"] < pos["h"], "the first finding starts on the first screen"
    assert pos["whyVisible"]
    browser.send("Target.closeTarget", {"targetId": browser.targets.pop(session)})


@pytest.mark.parametrize("log", [DYNAMIC_K])
@needs_chromium
def test_gaps_and_k0_bands_draw_without_errors(browser, tmp_path, log) -> None:
    from test_html_browser import check_page

    out = tmp_path / "k.html"
    write_html(analyze([log]), out)
    probe = check_page(browser, out)
    assert probe["problems"] == [], probe["problems"]
    assert len(probe["charts"]) == probe["expected_charts"]

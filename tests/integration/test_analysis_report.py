"""report.html opened in a real headless Chromium: it leads with the result (each model's score, its 95 %
interval, the wall time), then where the task time went; title, tables, one plot per metric drawn."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from orchestra_ops.analysis.analyze import analyze_run
from orchestra_ops.core.headline import Headline, ModelScore, proportion_half_width
from tests.browser import HeadlessChromium, chromium_path
from tests.runfactory import manifest_run_info, model_event, tool_event, write_run

pytestmark = pytest.mark.skipif(chromium_path() is None, reason="needs chromium (scripts/install-system-deps.sh)")

PAGE = """({
  firstSection: document.querySelector('h2').id,
  headline: [...document.querySelectorAll('#headline-scores tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  differences: [...document.querySelectorAll('#headline-differences tbody tr')]
               .map(r => [...r.cells].map(c => c.textContent)),
  facts: [...document.querySelectorAll('#headline-facts tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  resultAbove: document.querySelector('#headline').getBoundingClientRect().top
               < document.querySelector('#time').getBoundingClientRect().top,
  timeShare: [...document.querySelectorAll('#time-share tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  detailsFolded: !document.querySelector('details#details').open,
  title: document.title,
  h1: document.querySelector('h1').textContent,
  scores: [...document.querySelectorAll('#score-table tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  roles: [...document.querySelectorAll('#latency-by_role tbody tr')].map(r => r.cells[0].textContent),
  tools: [...document.querySelectorAll('#latency-tool-expert tbody tr')].map(r => r.cells[0].textContent),
  taskErrors: [...document.querySelectorAll('#task-errors tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
  routing: [...document.querySelectorAll('#routing-table tbody tr')].map(r => r.cells[0].textContent),
  plots: [...document.querySelectorAll('figure.plot')].map(f => {
    const img = f.querySelector('img'), box = img.getBoundingClientRect();
    return {plot: f.dataset.plot, complete: img.complete, natural: [img.naturalWidth, img.naturalHeight],
            shown: [box.width, box.height], src: img.src.slice(0, 22)};
  }),
  external: [...document.querySelectorAll('[src],[href]')].map(e => e.getAttribute('src') || e.getAttribute('href'))
            .filter(u => !u.startsWith('data:')),
  pageHeight: document.documentElement.scrollHeight,
})"""


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    ids = [f"t{i}" for i in range(30)]
    info = manifest_run_info(tmp_path / "inputs", ids=ids, templates={"orchestrator": "Solve: {problem}"},
                             judge_defaults={"temperature": 0}, models=["orchestrator", "answer"])
    events = [model_event("orchestrator", i, 0.5 + i / 10, task=t) for i, t in enumerate(ids)]
    events += [tool_event("search", i + 0.6, 2.0 + i / 7, expert=1.0 + i / 9, parts={"retrieval": 1.0}, task=t)
               for i, t in enumerate(ids)]
    results = [{"id": t, "status": "ok", "correct": i % 3 == 0, "elapsed": 3.0 + i} for i, t in enumerate(ids[:27])]
    results += [{"id": t, "status": "error", "error_type": "task_timeout", "elapsed": 99.0} for t in ids[27:]]
    headline = Headline("accuracy", scores=[ModelScore("orchestrator", 30.0, proportion_half_width(9, 30), 30)])
    run = write_run(tmp_path / "hle-run", results=results, events=events, run_info=info,
                    scores={"accuracy": 0.3, "n": 30, "headline_scores": headline.to_json()})
    (run / "live.json").write_text('{"state": "finished", "elapsed_total_s": 42.5}')
    analysis = analyze_run(run)
    assert analysis.report is not None and analysis.plots, analysis.plot_note
    expected_plots = sorted(files.get("linear", files.get("timeline")) for files in analysis.plots.values())
    assert len(expected_plots) == 6 + 1  # one per metric (task, role, search e2e + expert, 2 tokens); timeline
    assert sum(len(files) for files in analysis.plots.values()) == 2 * 6 + 1  # the log ones stay in plots/

    with HeadlessChromium(tmp_path) as browser:
        page = browser.open(analysis.report.as_uri(), PAGE)
    (tmp_path / "report.png").write_bytes(page.screenshot)
    shot_width, shot_height = _png_size(page.screenshot)
    assert shot_width > 0 and shot_height >= 900  # the whole page, not an empty viewport

    view = page.value
    assert view["firstSection"] == "headline" and view["resultAbove"]  # the report leads with the result
    assert view["headline"] == [["orchestrator", "30.0% ± 16.4", "30"]]  # 9 of 30, ± 1.96·sqrt(.3·.7/30)
    assert view["differences"] == []
    assert view["facts"][:2] == [["n (units)", "30 (27 ok, 3 failed)"], ["wall time", "42.5 s"]]
    assert view["facts"][2] == ["model calls", "30"]
    task_seconds = sum(3.0 + i for i in range(27)) + 3 * 99.0
    seconds = {"role orchestrator": sum(0.5 + i / 10 for i in range(30)),
               "tool search": sum(2.0 + i / 7 for i in range(30))}
    assert view["timeShare"] == [[name, "30", f"{s:.1f}", f"{100 * s / task_seconds:.1f}%"]
                                 for name, s in seconds.items()]
    assert view["detailsFolded"]  # the raw keys, latency tables and manifest: folded under details
    assert view["title"] == "hle · hle-run · orchestra-ops report" == view["h1"]
    # two models in run.json: no accuracy pooled over them from results.jsonl, only scores.json's own keys
    assert view["scores"][:2] == [["accuracy (scores.json)", "0.3", ""], ["n (scores.json)", "30", ""]]
    assert view["roles"] == ["orchestrator"] and view["tools"] == ["search"]
    assert view["taskErrors"] == [["task_timeout", "3"]]
    assert view["routing"] == ["orchestrator", "answer", "judge"]
    assert sorted(p["plot"] for p in view["plots"]) == expected_plots
    for plot in view["plots"]:
        assert plot["complete"] and plot["src"] == "data:image/png;base64,", plot
        assert plot["natural"][0] > 0 and plot["natural"][1] > 0, plot  # the PNG decoded
        assert plot["shown"][0] > 0 and plot["shown"][1] > 0, plot  # and takes room on the page
    assert view["external"] == []  # self-contained: nothing fetched
    assert view["pageHeight"] > 2000

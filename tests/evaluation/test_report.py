"""Reports: one document model written as Markdown and as one self-contained HTML page, the Table-2
tables, the honesty table, run findings and the label-curve figure."""

from __future__ import annotations

import base64
import re

import numpy as np
import pandas as pd
import pytest

from elical.data.synthetic import synthetic_records
from elical.evaluation.evaluate import EvalConfig, evaluate
from elical.honesty.scoring import markdown_table as honesty_markdown
from elical.metrics.base import metric_label
from elical.report.document import (
    Bullets,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
    to_html,
    to_markdown,
    write_document,
)
from elical.report.figures import band_note, metric_vs_labels, reliability_diagram
from elical.report.tables import metric_table, render_markdown
from elical.report.writer import write_evaluation
from elical.run.report import finding_line
from elical.run.results import Finding


def _png(path):
    reliability_diagram(np.array([0.2, 0.7, 0.9]), np.array([0, 1, 1]), "t", path)
    return path.read_bytes()


def test_document_is_markdown_with_links_and_html_with_embedded_figures(tmp_path):
    (tmp_path / "figures").mkdir()
    png = _png(tmp_path / "figures" / "r.png")
    doc = Document("Run <1>", [
        Heading("Findings"),
        Paragraph("It **holds**, *mostly*; see `results.csv` & <script>x</script>"),
        Bullets(("one **YES**", "two")),
        Table(pd.DataFrame({"Method": ["A|B", "C"], "x": ["1.0", "2.0"]}), "Scores",
              bold=pd.DataFrame({"Method": [False, False], "x": [False, True]})),
        Figure("figures/r.png", "Reliability: *A*"),
    ])
    md, page = to_markdown(doc), to_html(doc, tmp_path)
    assert md.startswith("# Run <1>\n\n## Findings\n\n") and "- one **YES**\n- two" in md
    assert "| A\\|B | 1.0 |\n| C | **2.0** |" in md and "![Reliability: *A*](figures/r.png)" in md
    assert "<strong>holds</strong>" in page and "<em>mostly</em>" in page and "<code>results.csv</code>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page and "<title>Run &lt;1&gt;</title>" in page
    assert "<td><strong>2.0</strong></td>" in page and "<caption>Scores</caption>" in page
    embedded = re.search(r'<img src="data:image/png;base64,([^"]+)"', page)
    assert embedded and base64.b64decode(embedded.group(1)) == png and 'src="figures/' not in page


def test_the_page_lists_its_sections_and_each_heading_can_be_linked_to(tmp_path):
    doc = Document("t", [Heading("Findings"), Paragraph("x"), Heading("Confidence vs labels"), Heading("Details", 3),
                         Heading("Findings"), Heading("AUROC (x100)")])
    page = to_html(doc, tmp_path)
    ids = re.findall(r'<h[23] id="([^"]+)">', page)
    assert ids == ["findings", "confidence-vs-labels", "details", "findings-2", "auroc-x100"]
    nav = re.search(r'<nav class="contents">(.*?)</nav>', page).group(1)
    assert re.findall(r'href="#([^"]+)"', nav) == ["findings", "confidence-vs-labels", "findings-2", "auroc-x100"]
    assert "Details" not in nav  # level-3 headings are not sections
    short = to_html(Document("t", [Heading("One"), Heading("Two")]), tmp_path)
    assert "<nav" not in short and '<h2 id="two">Two</h2>' in short


def test_a_missing_figure_stops_before_anything_is_written(tmp_path):
    doc = Document("t", [Figure("figures/none.png", "gone")])
    with pytest.raises(FileNotFoundError, match=r"none\.png: figure named in the report does not exist"):
        write_document(doc, tmp_path)
    assert list(tmp_path.iterdir()) == []


def _table() -> pd.DataFrame:
    rows = []
    for method, (auroc, ece) in {"A": ((0.6, 0.9), (0.10, 0.30)), "B": ((0.8, np.nan), (0.20, 0.05))}.items():
        for (dataset, group), a, e in zip((("nq", "in-domain"), ("popqa", "ood")), auroc, ece):
            rows += [{"method": method, "dataset": dataset, "group": group, "metric": "auroc", "value": a},
                     {"method": method, "dataset": dataset, "group": group, "metric": "ece@10-uniform", "value": e}]
    return pd.DataFrame(rows).assign(ci_low=0.0, ci_high=1.0)


def test_table2_marks_the_best_per_column_in_the_metrics_direction(tmp_path):
    md = render_markdown(_table())
    assert "### AUROC (x100, higher is better)\n\n| Method | In-domain: NQ | OOD: PopQA |" in md
    assert "| A | 60.00 | **90.00** |\n| B | **80.00** | – |" in md  # NaN is a dash, never the best
    assert "### ECE (10 uniform bins) (x100, lower is better)" in md
    assert "| A | **10.00** | 30.00 |\n| B | 20.00 | **5.00** |" in md
    page = to_html(Document("t", [metric_table(_table(), "auroc")]), tmp_path)
    assert "<th colspan='1' class='group'>In-domain</th>" in page and "<th rowspan='2'>Method</th>" in page


def test_one_metric_label_for_tables_and_sentences():
    assert metric_label("ece@10-uniform") == "ECE (10 uniform bins)"
    assert metric_label("ece@15-quantile-paper") == "ECE (15 quantile, paper bins)"
    assert metric_label("ece@10-uniform", short=True) == "ECE"
    assert (metric_label("auroc"), metric_label("alignment", short=True)) == ("AUROC", "Alignment")


def test_honesty_scores_render_x100_with_tau_and_dashes():
    table = pd.DataFrame([{"method": "gate", "dataset": "nq", "n": 4, "honesty": 0.625, "prudence": np.nan,
                           "tau": 0.41234}])
    assert honesty_markdown(table).splitlines()[2] == "| gate | nq | 4 | 62.5 | – | 0.412 |"


def test_findings_say_what_they_rest_on_and_one_seed_is_no_verdict():
    # the seeds a finding rests on are its own (Finding.seeds; None: training-free)
    trained = Finding("Does EliCal reach 95 % of the all-labels AUROC?", True, "AUROC 0.8 vs 0.7", seeds=3)
    free = Finding("Does self-consistency track correctness?", False, "AUROC 0.6")
    assert finding_line(trained) == f"{trained.question} **YES** (rests on 3 seeds): AUROC 0.8 vs 0.7"
    one = finding_line(Finding(trained.question, True, "x", seeds=1))
    assert "**n/a (1 seed)**" in one and "one seed cannot support a YES/NO" in one and "YES**" not in one
    assert "**NO** (training-free: no training seeds involved)" in finding_line(free)
    assert "**not measurable**: x" in finding_line(Finding(trained.question, None, "x", seeds=3))


def test_label_curves_draw_the_best_training_free_baseline_and_say_what_the_band_is(tmp_path):
    rows = [("Prob", 0, 0.70, np.nan, 1), ("Consis-Sem", 0, 0.75, np.nan, 1), ("Eli-Only", 0, 0.6, 0.01, 3)]
    rows += [(m, b, v, 0.02, 3) for m in ("EliCal", "Cal-Only") for b, v in ((10, 0.65), (100, 0.8))]
    summary = pd.DataFrame(rows, columns=["method", "budget", "mean", "std", "n"])
    summary = summary.assign(split="in-domain", metric="auroc")
    fig = metric_vs_labels(summary, "auroc", ["in-domain"], tmp_path / "a.png", "AUROC", ("Prob", "Consis-Sem"))
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "best training-free: Consis-Sem" in labels and "best training-free: Prob" not in labels
    assert band_note(summary) in [t.get_text() for t in fig.texts]
    assert band_note(summary) == "lines: mean over 3 seeds; shaded band: mean ± 1 sd over the seeds"
    assert "no band" in band_note(summary.assign(n=1))
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluate_writes_table_md_with_links_and_a_self_contained_table_html(tmp_path):
    records = synthetic_records([(f"q {i}?", [f"a {i}"]) for i in range(60)], "nq", seed=1)
    evaluation = evaluate(records, config=EvalConfig(methods=["Consis-Sem", "Prob"], n_resamples=10))
    written = write_evaluation(evaluation, tmp_path)
    md, page = written.table_md.read_text(), written.table_html.read_text()
    assert md.startswith("# Evaluation\n") and "(figures/reliability_consis-sem.png)" in md
    assert page.count("data:image/png;base64,") == len(written.figures) >= 3 and 'src="figures/' not in page
    assert ">AUROC (x100, higher is better)</h3>" in page


def test_a_wide_table_scrolls_in_its_box_and_the_page_keeps_its_width(tmp_path):
    """A run with many datasets makes Table 2 wider than the page: in a real browser the table's box scrolls
    sideways and the page itself does not."""
    from extras import BROWSER_ARGS, CHROMIUM, browser_api

    sync_api = browser_api()
    wide = pd.DataFrame({"Method": ["EliCal (1000)", "N-Prob"], **{f"In-domain: dataset_{i}": ["71.20", "68.90"] for i in range(40)}})
    (tmp_path / "report.html").write_text(to_html(Document("wide", [Heading("AUROC"), Table(wide, "AUROC")]), tmp_path))
    with sync_api.sync_playwright() as play:
        browser = play.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 700})
            page.goto((tmp_path / "report.html").resolve().as_uri())
            page_width, view = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            box = page.evaluate("(() => { const d = document.querySelector('div.wide'); return [d.scrollWidth, d.clientWidth]; })()")
        finally:
            browser.close()
    assert page_width <= view, (page_width, view)
    assert box[0] > box[1] > 0  # the table is wider than its box, which scrolls

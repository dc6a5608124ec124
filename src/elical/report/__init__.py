"""Showing results: a report as data (document.py) rendered as Markdown and self-contained HTML, Table-2
tables (Markdown, HTML, terminal) and PNG figures; the numbers themselves are computed elsewhere."""

from __future__ import annotations

from typing import TYPE_CHECKING

from elical.core._lazy import lazy_exports

if TYPE_CHECKING:
    from elical.report.document import Document, write_document
    from elical.report.tables import metric_matrix, render_markdown, render_rich
    from elical.report.writer import write_evaluation

_LAZY = {  # name -> the submodule that defines it, imported on first use (PEP 562)
    "Document": "elical.report.document",
    "write_document": "elical.report.document",
    "metric_matrix": "elical.report.tables",
    "render_markdown": "elical.report.tables",
    "render_rich": "elical.report.tables",
    "write_evaluation": "elical.report.writer",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY)

__all__ = ["Document", "metric_matrix", "render_markdown", "render_rich", "write_document", "write_evaluation"]

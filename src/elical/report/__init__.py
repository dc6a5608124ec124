"""Showing results: a report as data (document.py) rendered as Markdown and self-contained HTML, Table-2
tables (Markdown, HTML, terminal) and PNG figures; the numbers themselves are computed elsewhere."""

from elical.report.document import Document, write_document
from elical.report.tables import metric_matrix, render_markdown, render_rich
from elical.report.writer import write_evaluation

__all__ = ["Document", "metric_matrix", "render_markdown", "render_rich", "write_document", "write_evaluation"]

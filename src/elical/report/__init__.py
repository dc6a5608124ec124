"""Tables and figures a person would rather look at than read: Markdown, terminal and PNG."""

from elical.report.tables import metric_matrix, render_markdown, render_rich
from elical.report.writer import write_evaluation

__all__ = ["metric_matrix", "render_markdown", "render_rich", "write_evaluation"]

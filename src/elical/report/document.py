"""A report as data (a title and blocks: headings, paragraphs, bullets, tables, figures), rendered two ways.

Rendering is kept apart from computing: the commands build a :class:`Document` from numbers they
computed elsewhere, and :func:`write_document` writes it as Markdown (figures linked by relative path)
and as one self-contained HTML page (figures embedded as data URIs, so the page can be mailed).
Prose (paragraphs, bullets, captions) is inline Markdown; table cells are plain text.
"""

from __future__ import annotations

import base64
import html
import itertools
import mimetypes
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from markdown_it import MarkdownIt

from elical.core.io import atomic_write

MISSING = "–"  # a value that is not defined (NaN), in every table
_INLINE = MarkdownIt("commonmark", {"html": False})  # raw HTML in the text is escaped, never passed through
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;line-height:1.45;"
    "color:#222}h1{border-bottom:2px solid #ddd}h2{border-bottom:1px solid #eee;margin-top:1.6em}"
    "table{border-collapse:collapse;font-size:13px;margin:0.5em 0 1em}"
    "th{background:#f3f3f3}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}"
    "td:first-child,th:first-child{text-align:left;white-space:nowrap}th.group{text-align:center}"
    "caption{text-align:left;font-weight:bold;padding:4px 0}div.wide{overflow-x:auto;max-width:100%}"
    "figure{display:inline-block;vertical-align:top;max-width:100%;margin:0.6em 1em 0.6em 0}"
    "img{max-width:100%}figcaption{font-size:13px;color:#555;max-width:60em}"
    "code{background:#f5f5f5;padding:0 3px}nav.contents{font-size:14px;line-height:1.8;color:#777}"
)


@dataclass(frozen=True)
class Heading:
    """A section heading (level 2 and below; the document title is level 1)."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    """A paragraph of inline Markdown."""

    text: str


@dataclass(frozen=True)
class Bullets:
    """A bulleted list, each item inline Markdown."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table of display strings; ``bold`` (same shape, booleans) marks the cells to emphasise. Two-level
    columns such as ('In-domain', 'NQ') read 'In-domain: NQ' in Markdown and get a grouped header in HTML."""

    frame: pd.DataFrame
    caption: str = ""
    bold: pd.DataFrame | None = None


@dataclass(frozen=True)
class Figure:
    """An image file, ``path`` relative to the document's folder, with its caption (inline Markdown)."""

    path: str
    caption: str


Block = Heading | Paragraph | Bullets | Table | Figure


@dataclass
class Document:
    """A title and its blocks, in order."""

    title: str
    blocks: list[Block] = field(default_factory=list)


def _bold_mask(table: Table) -> pd.DataFrame:
    if table.bold is None:
        return pd.DataFrame(False, index=table.frame.index, columns=table.frame.columns)
    if table.bold.shape != table.frame.shape:
        raise ValueError(f"table '{table.caption}': bold mask {table.bold.shape} does not match {table.frame.shape}")
    return table.bold


def column_labels(columns: pd.Index) -> list[str]:
    """One label per column: the levels of a two-level column joined by ': ', empty levels left out."""
    return [": ".join(str(p) for p in c if str(p)) if isinstance(c, tuple) else str(c) for c in columns]


def markdown_table(table: Table) -> str:
    """The table as a GitHub-flavoured Markdown table (bold cells as **x**, '|' escaped)."""
    bold = _bold_mask(table).to_numpy()

    def cell(text: object, strong: bool) -> str:
        shown = str(text).replace("|", "\\|")
        return f"**{shown}**" if strong else shown

    lines = ["| " + " | ".join(cell(c, False) for c in column_labels(table.frame.columns)) + " |",
             "|" + "---|" * len(table.frame.columns)]
    for values, marks in zip(table.frame.itertuples(index=False), bold):
        lines.append("| " + " | ".join(cell(v, bool(b)) for v, b in zip(values, marks)) + " |")
    return "\n".join(lines)


def html_table(table: Table) -> str:
    """The table as an HTML table (bold cells in <strong>, every cell escaped), in a box that scrolls sideways
    when the table is wider than the page (a run with many datasets), so the page itself keeps its width."""
    bold = _bold_mask(table).to_numpy()
    rows = []
    for values, marks in zip(table.frame.itertuples(index=False), bold):
        cells = [f"<strong>{html.escape(str(v))}</strong>" if b else html.escape(str(v)) for v, b in zip(values, marks)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    caption = f"<caption>{inline_html(table.caption)}</caption>" if table.caption else ""
    return (f"<div class='wide'><table>{caption}<thead>{_html_header(table.frame.columns)}</thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _html_header(columns: pd.Index) -> str:
    """Header rows: one, or for two-level columns a row of groups (spanning their columns) over the names."""
    if not isinstance(columns, pd.MultiIndex) or columns.nlevels != 2:
        return "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in column_labels(columns)) + "</tr>"
    top, bottom = [], []
    for group, members in itertools.groupby(columns, key=lambda c: str(c[0])):
        names = [str(c[1]) for c in members]
        if names == [""]:
            top.append(f"<th rowspan='2'>{html.escape(group)}</th>")
            continue
        top.append(f"<th colspan='{len(names)}' class='group'>{html.escape(group)}</th>")
        bottom += [f"<th>{html.escape(name)}</th>" for name in names]
    return f"<tr>{''.join(top)}</tr><tr>{''.join(bottom)}</tr>"


def inline_html(text: str) -> str:
    """Inline Markdown (**bold**, *italic*, `code`, links) as HTML, anything else escaped."""
    return _INLINE.renderInline(text)


def blocks_markdown(blocks: list[Block]) -> str:
    """Blocks as Markdown, separated by blank lines; figures are relative image links."""
    parts = []
    for block in blocks:
        if isinstance(block, Heading):
            parts.append("#" * block.level + " " + block.text)
        elif isinstance(block, Paragraph):
            parts.append(block.text)
        elif isinstance(block, Bullets):
            parts.append("\n".join(f"- {item}" for item in block.items))
        elif isinstance(block, Table):
            parts.append((f"**{block.caption}**\n\n" if block.caption else "") + markdown_table(block))
        else:
            parts.append(f"![{block.caption}]({block.path})\n\n*{block.caption}*")
    return "\n\n".join(parts) + "\n"


def to_markdown(document: Document) -> str:
    """The document as Markdown, its title as the level-1 heading."""
    return f"# {document.title}\n\n" + blocks_markdown(document.blocks)


def data_uri(path: Path) -> str:
    """The file as a base64 data URI (its MIME type from the suffix)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: figure named in the report does not exist")
    mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def heading_ids(blocks: Sequence[Block]) -> dict[int, str]:
    """An HTML id for each heading (by its index in ``blocks``): its words, lower case, joined by '-', and a
    number after a repeated one, so a section can be linked to (the page's contents list does)."""
    ids: dict[int, str] = {}
    seen: dict[str, int] = {}
    for i, block in enumerate(blocks):
        if isinstance(block, Heading):
            slug = "-".join(re.findall(r"[a-z0-9]+", block.text.lower())) or "section"
            seen[slug] = seen.get(slug, 0) + 1
            ids[i] = slug if seen[slug] == 1 else f"{slug}-{seen[slug]}"
    return ids


def _contents(blocks: Sequence[Block], ids: dict[int, str]) -> str:
    """The page's sections (level-2 headings) as links, where there are several to jump between."""
    sections = [(ids[i], block.text) for i, block in enumerate(blocks) if isinstance(block, Heading) and block.level == 2]
    if len(sections) < 3:
        return ""
    links = " · ".join(f'<a href="#{anchor}">{html.escape(text)}</a>' for anchor, text in sections)
    return f'<nav class="contents">{links}</nav>\n'


def _html_block(block: Block, folder: Path, anchor: str | None = None) -> str:
    if isinstance(block, Heading):
        return f'<h{block.level} id="{anchor}">{html.escape(block.text)}</h{block.level}>'
    if isinstance(block, Paragraph):
        return f"<p>{inline_html(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{inline_html(item)}</li>" for item in block.items) + "</ul>"
    if isinstance(block, Table):
        return html_table(block)
    return (f'<figure><img src="{data_uri(folder / block.path)}" alt="{html.escape(block.caption)}">'
            f"<figcaption>{inline_html(block.caption)}</figcaption></figure>")


def to_html(document: Document, folder: Path) -> str:
    """The document as one standalone HTML page; figures (relative to ``folder``) are embedded."""
    ids = heading_ids(document.blocks)
    body = "\n".join(_html_block(block, folder, ids.get(i)) for i, block in enumerate(document.blocks))
    title = html.escape(document.title)
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style>"
            f"</head><body>\n<h1>{title}</h1>\n{_contents(document.blocks, ids)}{body}\n</body></html>\n")


def write_document(document: Document, folder: str | Path, stem: str = "report") -> tuple[Path, Path]:
    """Write ``<stem>.md`` and ``<stem>.html`` into ``folder``; returns their paths."""
    folder = Path(folder)
    md_path, html_path = folder / f"{stem}.md", folder / f"{stem}.html"
    page = to_html(document, folder)  # first: a missing figure stops before anything is written
    with atomic_write(md_path) as tmp:
        tmp.write_text(to_markdown(document), encoding="utf-8")
    with atomic_write(html_path) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return md_path, html_path

"""Markdown rendering of a report ``Document``."""

from __future__ import annotations

from pgdyno.reports.document import Document, Table


def render_document(doc: Document) -> str:
    out = [f"# {doc.title}", ""]
    for section in doc.sections:
        if section.anchor:
            out += [f'<a id="{section.anchor}"></a>', ""]
        out += [f"{'#' * section.level} {section.title}", ""]
        for para in section.paragraphs:
            out += [para, ""]
        for table in section.tables:
            out += table_lines(table)
        for block in section.preformatted:
            out += ["```", block, "```", ""]
        if section.markdown:
            out += [section.markdown.strip(), ""]
        for caption, path in section.images:
            out += [f"![{caption}]({path})", ""]
    return "\n".join(out).rstrip() + "\n"


def table_lines(table: Table) -> list[str]:
    if not table.rows:
        return []
    lines = []
    if table.caption:
        lines += [f"*{table.caption}*", ""]
    lines.append("| " + " | ".join(table.headers) + " |")
    # Numbers right-aligned, text left: the same per-column decision as the HTML.
    lines.append("|" + "|".join("---:" if numeric else "---"
                                for numeric in table.numeric_columns()) + "|")
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in table.rows]
    return [*lines, ""]

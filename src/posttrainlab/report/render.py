"""The report as a list of blocks, rendered to Markdown and to one self-contained HTML file.

``posttrainlab.report.build`` says what the report holds; this module says how it looks. Both outputs
come from the same blocks, so ``report.md`` and ``report.html`` cannot drift apart. The HTML carries
its CSS inline and its images as base64 ``data:`` URIs: nothing is fetched from elsewhere, so the file
can be mailed or archived on its own.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """A heading (``level``), paragraph, table (``header`` + ``rows``), image (``image`` = file stem) or a
    pre-rendered section (``text`` its Markdown, ``html`` its HTML: the gallery, ``report.gallery_html``)."""

    kind: str  # "h" | "p" | "table" | "img" | "raw"
    text: str = ""
    level: int = 2
    header: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()
    image: str = ""
    html: str = ""


def heading(text: str, level: int = 2) -> Block:
    """A heading; level 1 is the report's title."""
    return Block("h", text, level=level)


def paragraph(text: str) -> Block:
    """Plain text (escaped in HTML; no Markdown markup is added)."""
    return Block("p", text)


def table(header: list[str], rows: list[list[str]]) -> Block:
    """A table of already formatted cells; every row as long as the header."""
    return Block("table", header=tuple(header), rows=tuple(tuple(r) for r in rows))


def image(name: str, alt: str) -> Block:
    """The plot ``report_files/<name>.png``, with ``alt`` as its caption."""
    return Block("img", alt, image=name)


def raw(markdown: str, html_text: str) -> Block:
    """A section drawn by its own module: ``markdown`` goes into report.md, ``html_text`` into report.html as is."""
    return Block("raw", markdown, html=html_text)


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:62rem;margin:2rem auto;padding:0 1rem;"
    "color:#222;line-height:1.45}table{border-collapse:collapse;margin:.5rem 0 1.2rem;font-size:.92em}"
    "th,td{border:1px solid #ccc;padding:.25rem .6rem;text-align:right}th{background:#f2f2f2}"
    ".l{text-align:left}img{max-width:100%}figure{margin:.8rem 0 1.2rem}"
    "figcaption{color:#555;font-size:.9em}h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;margin-top:2rem}"
)


def _numeric_columns(block: Block) -> list[bool]:
    """Which columns hold numbers (right-aligned); the first column is always a label.

    >>> _numeric_columns(table(["stage", "status", "time"], [["sft", "done", "4 min 05 s"], ["total", "", "9 s"]]))
    [False, False, True]
    """
    columns = list(zip(*block.rows, strict=False)) or [()] * len(block.header)
    return [i > 0 and all(c[:1].isdigit() or c in ("", "–") for c in col) for i, col in enumerate(columns)]


def to_markdown(report: list[Block], folder: str = "report_files") -> str:
    """Markdown; images point at ``folder/<name>.png``."""
    lines = []
    for b in report:
        if b.kind == "h":
            lines += ["#" * b.level + " " + b.text, ""]
        elif b.kind == "p":
            lines += [b.text, ""]
        elif b.kind == "img":
            lines += [f"![{b.text}]({folder}/{b.image}.png)", ""]
        elif b.kind == "raw":
            lines += [b.text.rstrip("\n"), ""]
        else:
            row = lambda cells: "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"  # noqa: E731
            rule = "|" + "|".join("---:" if n else ":---" for n in _numeric_columns(b)) + "|"
            lines += [row(b.header), rule, *map(row, b.rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def to_html(report: list[Block], images: dict[str, bytes]) -> str:
    """One HTML file: inline CSS, images as base64 data URIs, nothing fetched from elsewhere."""
    e = html.escape
    title = next((b.text for b in report if b.kind == "h"), "report")
    body = []
    for b in report:
        if b.kind == "h":
            body.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif b.kind == "p":
            body.append(f"<p>{e(b.text)}</p>")
        elif b.kind == "img":
            data = base64.b64encode(images[b.image]).decode("ascii")
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{e(b.text)}">')
            body.append(f"<figcaption>{e(b.text)}</figcaption></figure>")
        elif b.kind == "raw":
            body.append(b.html)
        else:
            left = [' class="l"' if not n else "" for n in _numeric_columns(b)]
            head = "".join(f"<th{a}>{e(h)}</th>" for a, h in zip(left, b.header, strict=True))
            rows = "".join(
                "<tr>" + "".join(f"<td{a}>{e(c)}</td>" for a, c in zip(left, r, strict=True)) + "</tr>" for r in b.rows
            )
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{e(title)}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n" + "\n".join(body) + "\n</body>\n</html>\n"
    )

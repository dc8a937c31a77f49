"""The gallery drawn: in report.html every distinct sample of each chosen problem, each line coloured by its PRM
score (the number printed too) with its exact label beside it, and the picks marked; in report.md one row per
problem (``report.gallery`` chooses the problems and reads the files).

Plain HTML with its own small inline style (no script, nothing fetched): the colour scale runs from orange (score 0)
through white (0.5) to blue (1), so it does not compete with the labels' ✓ and ✗ and stays readable without red/green
vision; a legend shows it, and the score is printed on every line anyway.
"""

from __future__ import annotations

import html

from posttrainlab.errors import BadInput
from posttrainlab.report.gallery import KINDS, Gallery, Line, Shown, Solution, load_gallery
from posttrainlab.report.render import Block, heading, paragraph, raw, table, to_markdown
from posttrainlab.report.run_folder import RunFolder

TITLE = "Gallery: where the PRM is right and where it is fooled"
#: the colour scale's stops (score, RGB): orange, white, blue (ColorBrewer RdBu's lighter ends)
STOPS = ((0.0, (239, 138, 98)), (0.5, (247, 247, 247)), (1.0, (103, 169, 207)))
UNSCORED = "#dddddd"
MARKS = {"majority": "majority", "prm": "PRM pick", "beam": "beam search"}
MAX_ROWS = 6  # distinct solutions shown per problem; marked and right ones always are

_CSS = (
    "#gallery .gl{display:flex;gap:.3rem;align-items:center;flex-wrap:wrap;font-size:.88em;margin:.4rem 0 1rem}"
    "#gallery .sw{display:inline-block;padding:.05rem .5rem;border:1px solid #bbb;font-family:monospace}"
    "#gallery h3{margin:1.6rem 0 .3rem}#gallery .gq{margin:.2rem 0}#gallery .gs{margin:.2rem 0 .5rem}"
    "#gallery table.gt td,#gallery table.gt th{text-align:left;vertical-align:top}"
    "#gallery .ln{font-family:ui-monospace,Menlo,Consolas,monospace;padding:.05rem .4rem;margin:.1rem 0;"
    "white-space:pre-wrap;border-radius:3px}#gallery .sc{display:inline-block;width:2.6rem;color:#333}"
    "#gallery .ok{color:#1a7f37;font-weight:bold}#gallery .no{color:#b42318;font-weight:bold}"
    "#gallery .lb{display:inline-block;width:1.2rem}#gallery .b{display:inline-block;padding:0 .35rem;margin:.1rem;"
    "border-radius:3px;font-size:.85em;color:#fff;white-space:nowrap}#gallery .majority{background:#6a3d9a}"
    "#gallery .prm{background:#1f4e79}#gallery .beam{background:#8c510a}#gallery tr.picked{outline:2px solid #555}"
)


def score_colour(score: float | None) -> str:
    """The background of a line with this PRM score (``UNSCORED`` for ``None``), linear between ``STOPS``.

    >>> score_colour(0.0), score_colour(0.5), score_colour(1.0), score_colour(0.75), score_colour(None)
    ('#ef8a62', '#f7f7f7', '#67a9cf', '#afd0e3', '#dddddd')
    """
    if score is None:
        return UNSCORED
    s = min(max(float(score), 0.0), 1.0)
    (a, ca), (b, cb) = next((lo, hi) for lo, hi in zip(STOPS, STOPS[1:], strict=False) if s <= hi[0])
    t = (s - a) / (b - a)
    return "#" + "".join(f"{round(x + t * (y - x)):02x}" for x, y in zip(ca, cb, strict=True))


def _answer(value) -> str:
    return "no answer" if value is None else str(value)


def _tick(ok: bool | None) -> str:
    return "?" if ok is None else "✓" if ok else "✗"


def _pick(problem: Shown, mark: str) -> Solution | None:
    return next((s for s in problem.solutions if mark in s.marks), None)


def _summary(problem: Shown, n: int, aggregation: str) -> list[tuple[str, str]]:
    """``(mark, text)`` of each pick: its answer and grade."""
    out = []
    for mark in MARKS:
        s = _pick(problem, mark)
        if s is not None:
            votes = f" ({problem.votes} of {n} votes)" if mark == "majority" else ""
            name = f"PRM pick (top {aggregation} score)" if mark == "prm" else MARKS[mark]
            out.append((mark, f"{name}: {_answer(s.parsed)} {_tick(s.correct)}{votes}"))
    return out


def _shown_rows(problem: Shown) -> tuple[list[Solution], list[Solution]]:
    """The solutions drawn (at most ``MAX_ROWS`` unless more are marked or right: those always are) and the rest."""
    room = MAX_ROWS - sum(bool(s.marks or s.correct) for s in problem.solutions)
    rows, rest = [], []
    for s in problem.solutions:  # highest score first: the rest are the lowest-scored unpicked wrong ones
        if s.marks or s.correct or room > 0:
            room -= not (s.marks or s.correct)
            rows.append(s)
        else:
            rest.append(s)
    return rows, rest


def _line_html(line: Line) -> str:
    e = html.escape
    score = "–" if line.score is None else f"{line.score:.2f}"
    cls = "" if line.label is None else " ok" if line.label else " no"
    title = "exact label: " + {None: "unknown", 1: "right (1)", 0: "wrong (0)"}[line.label]
    return (
        f'<div class="ln" style="background:{score_colour(line.score)}"><span class="sc">{score}</span>'
        f'<span class="lb{cls}" title="{title}">{_tick(None if line.label is None else bool(line.label))}</span>'
        f"{e(line.text)}</div>"
    )


def _problem_html(i: int, problem: Shown, g: Gallery) -> str:
    e = html.escape
    title = next(k.title for k in KINDS if k.name == problem.kind)
    picks = " · ".join(f'<span class="b {m}">{e(MARKS[m])}</span> {e(t.split(": ", 1)[1])}'
                       for m, t in _summary(problem, g.n, g.aggregation))  # fmt: skip
    rows, left = _shown_rows(problem)
    body = []
    for s in rows:
        badges = "".join(f'<span class="b {m}">{e(MARKS[m])}</span>' for m in s.marks)
        count = f"{len(s.samples)} of {g.n}" if s.samples else "beam search only"
        lines = "".join(map(_line_html, s.lines)) or '<div class="ln">(empty)</div>'
        grade = f'<span class="{"ok" if s.correct else "no"}">{_tick(s.correct)}</span> {e(_answer(s.parsed))}'
        cls = ' class="picked"' if s.marks else ""
        body.append(f"<tr{cls}><td>{badges}</td><td>{count}</td><td>{lines}</td><td>{s.score:.2f}</td>"
                    f"<td>{grade}</td></tr>")  # fmt: skip
    more = (f"<p>… and {len(left)} more wrong solutions ({sum(len(s.samples) for s in left)} samples), lower "
            "scored, none picked.</p>" if left else "")  # fmt: skip
    return (
        f"<h3>{i}. {e(title)}: {e(problem.id)} ({e(problem.category)})</h3>"
        f'<p class="gq">{e(problem.question)} <b>Reference answer: {e(_answer(problem.answer))}</b></p>'
        f'<p class="gs">{picks}</p><table class="gt"><thead><tr><th>picked by</th><th>samples</th>'
        f"<th>lines: PRM score, exact label, text</th><th>score ({e(g.aggregation)})</th><th>answer</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>{more}"
    )


def _intro(g: Gallery) -> str:
    counts = "; ".join(f"{k.title} {g.counts.get(k.name, 0)}" for k in KINDS)
    beam = f" ({g.beam})" if g.beam else ""
    split = g.split.capitalize()
    return (
        f"{split} problems of the best-of-N run, with their N = {g.n} samples (identical ones shown once, with their "
        f"count). Marked: the majority answer, the PRM's pick (highest {g.aggregation} step score) and beam "
        f"search's answer{beam}. Of all {sum(g.counts.values())} problems: {counts}. Shown: the first problems of "
        "each kind, preferring those with both right and wrong samples and a category not shown yet. Each line is "
        "coloured by the PRM's score (printed on it); ✓ / ✗ is its exact label: right until the solution's first "
        "wrong line, wrong from it on, an Answer line right when its answer is; a missing answer line is added "
        "as (no answer), labelled wrong (scored only by a PRM trained with that step)."
    )


def _legend() -> str:
    swatches = "".join(
        f'<span class="sw" style="background:{score_colour(v)}">{v:.2f}</span>' for v in (0, 0.25, 0.5, 0.75, 1)
    )
    return (
        f'<div class="gl">PRM score: {swatches}<span class="sw" style="background:{UNSCORED}">–</span> not scored'
        '&nbsp; label: <span class="ok">✓</span> right <span class="no">✗</span> wrong&nbsp; '
        + "".join(f'<span class="b {m}">{t}</span>' for m, t in MARKS.items())
        + "</div>"
    )


def _steps_md(s: Solution | None) -> str:
    if s is None:
        return "–"
    return "; ".join(f"{x.text} ({'–' if x.score is None else f'{x.score:.2f}'} {_tick(x.label)})" for x in s.lines)


def gallery_markdown(g: Gallery) -> str:
    """The short version for report.md: one row per problem, its picks, and the lines of its top-scored right and
    top-scored wrong sample (one of them is the PRM's pick) with their scores and exact labels."""
    rows = []
    for p in g.problems:
        picks = dict(_summary(p, g.n, g.aggregation))
        top = [next((s for s in p.solutions if s.correct == ok and s.samples), None) for ok in (True, False)]
        title = next(k.title for k in KINDS if k.name == p.kind)
        rows.append([f"{p.id} ({p.category})", title, _answer(p.answer),
                     *(picks.get(m, "–").split(": ", 1)[-1] for m in MARKS), *map(_steps_md, top)])  # fmt: skip
    header = ["problem", "kind", "answer", "majority", f"PRM pick ({g.aggregation})", "beam search",
              "top-scored right sample (score, label)", "top-scored wrong sample (score, label)"]  # fmt: skip
    blocks = [heading(TITLE), paragraph(_intro(g) + " report.html draws every sample."), table(header, rows)]
    return to_markdown(blocks)


def gallery_html(g: Gallery) -> str:
    """The section for report.html (anchor ``#gallery``)."""
    problems = "".join(_problem_html(i, p, g) for i, p in enumerate(g.problems, 1))
    return (
        f'<section id="gallery"><style>{_CSS}</style><h2>{html.escape(TITLE)}</h2><p>{html.escape(_intro(g))}</p>'
        f"{_legend()}{problems}</section>"
    )


def gallery_section(run: RunFolder) -> list[Block]:
    """The gallery's blocks; without best-of-N output (or with a malformed one) a line saying why."""
    try:
        g = load_gallery(run)
    except BadInput as err:
        return [heading("Gallery"), paragraph(f"No gallery of samples: {err}.")]
    return [raw(gallery_markdown(g), gallery_html(g))]


__all__ = ["gallery_html", "gallery_markdown", "gallery_section", "score_colour"]

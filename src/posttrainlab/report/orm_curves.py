"""Process vs outcome supervision at test time: best-of-N curves of a PRM, an ORM and majority vote (issue #39).

Lightman et al. (2023, "Let's Verify Step by Step", Figure 3) plot the share of problems solved by best-of-N
against N, one line per verifier: the process-supervised RM, the outcome-supervised RM and majority voting. This
module draws the same figure from a best-of-N run that scored one set of samples with both a PRM and an ORM
(``posttrain eval best-of-n --prm PRM --orm ORM``, ``runners.best_of_n``), and writes the report's section:

- the curves: the PRM's pick (``prm_<vote_aggregation>``), the ORM's (``orm``: its last step's score), majority
  vote, and the PRM- and ORM-weighted votes, with 95% Wilson bars, the oracle (pass@N) dashed above them
  (``runners.prm_plots.best_of_n_figure``, relabelled); a ``*`` over an N where the PRM's and the ORM's picks
  differ at p < 0.05 (McNemar's exact test, paired over problems);
- the tables: accuracy at each N, and the paired comparisons at each N that ``bon.json``'s ``paired`` holds
  (``eval.best_of_n.paired_by_n``: B − A, Newcombe's paired 95% interval, McNemar's exact p).

``section(run_root)`` returns the section as Markdown; ``blocks(run_root)`` the same as report blocks (for
``report.build``, which renders them to Markdown and HTML alike); ``figures(run_root)`` the PNG the section's image
names (``IMAGE``), for ``report_files/``. ``run_root`` is a quickstart run folder (its ``best-of-n/bon.json``) or a
best-of-N output folder itself. A run without an ORM gives no section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from posttrainlab.eval.compare import describe, p_value, points
from posttrainlab.report.format import pct, with_ci
from posttrainlab.report.plots import stat, sub
from posttrainlab.report.render import Block, heading, image, paragraph, table, to_markdown
from posttrainlab.run_layout import BON, RunLayout

#: the section's plot: ``report_files/process_vs_outcome.png`` (and beside ``bon.json`` in a best-of-N folder)
IMAGE = "process_vs_outcome"
#: significance level of the ``*`` markers (McNemar's exact test, as ``eval.compare.ALPHA``)
ALPHA = 0.05


def prm_selector(bon: dict[str, Any]) -> str:
    """The PRM's pick the comparison uses: the aggregation its vote uses (``eval.best_of_n`` "Paired at each n'").

    >>> prm_selector({"vote_aggregation": "last"}), prm_selector({})
    ('prm_last', 'prm_min')
    """
    return f"prm_{bon.get('vote_aggregation', 'min')}"


def curves(bon: dict[str, Any]) -> list[str]:
    """The selectors drawn and tabled, in order: PRM, ORM, majority, PRM vote, ORM vote (those the run has).

    >>> curves({"selectors": {"prm_min": {}, "prm_last": {}, "majority": {}, "prm_vote": {}, "orm": {}}})
    ['prm_min', 'orm', 'majority', 'prm_vote']
    """
    have = sub(bon, "selectors")
    return [s for s in (prm_selector(bon), "orm", "majority", "prm_vote", "orm_vote") if s in have]


def label(name: str, bon: dict[str, Any]) -> str:
    """A curve's name in words.

    >>> label("prm_min", {}), label("orm", {}), label("orm_vote", {})
    ('PRM (min step score)', 'ORM (last step score)', 'ORM-weighted vote')
    """
    if name.startswith("prm_") and name != "prm_vote":
        return f"PRM ({name[4:]} step score)"
    agg = bon.get("vote_aggregation", "min")
    names = {"orm": "ORM (last step score)", "majority": "majority vote", "prm_vote": f"PRM-weighted vote ({agg})",
             "orm_vote": "ORM-weighted vote", "oracle": "oracle (pass@N)"}  # fmt: skip
    return names.get(name, name)


def key_pair(bon: dict[str, Any]) -> dict[str, Any] | None:
    """``bon.json``'s paired comparison of the PRM's pick against the ORM's (``None`` when it has none)."""
    return sub(bon, "paired").get(f"{prm_selector(bon)} vs orm") or None


def significant_ns(bon: dict[str, Any]) -> list[int]:
    """The N at which the PRM's and the ORM's picks differ at p < ``ALPHA``.

    >>> significant_ns({"paired": {"prm_min vs orm": {"by_n": {"1": {"mcnemar_p": 1.0}, "4": {"mcnemar_p": 0.01}}}}})
    [4]
    """
    pair = key_pair(bon)
    return sorted(int(n) for n, s in sub(pair, "by_n").items() if s.get("mcnemar_p", 1.0) < ALPHA) if pair else []


def process_vs_outcome_figure(bon: dict[str, Any]):
    """Accuracy against N, one line per ``curves`` selector and the oracle (``None`` without an ORM curve)."""
    from posttrainlab.report.figstyle import FONT, style
    from posttrainlab.runners.prm_plots import best_of_n_figure, curve_label

    names = curves(bon)
    if "orm" not in names:
        return None
    fig = best_of_n_figure({**bon, "selectors": {s: bon["selectors"][s] for s in names}})
    ax = fig.axes[0]
    words = {curve_label(s, bon): label(s, bon) for s in [*names, "oracle"]}
    for handle, old in zip(*ax.get_legend_handles_labels(), strict=True):  # the curves' names in words
        handle.set_label(words.get(old, old))
    ax.legend(fontsize=FONT["legend"], loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    marked = significant_ns(bon)
    if marked:
        top, pair = ax.get_ylim()[1], ("orm", prm_selector(bon))
        for n in marked:  # just above the higher of the two bars at n
            high = max(100 * bon["selectors"][s][str(n)]["ci95"][1] for s in pair)
            ax.annotate("*", (n, min(high + 2.0, top - 1.0)), ha="center", fontsize=FONT["title"])
    star = f"; * PRM vs ORM p < {ALPHA:g}" if marked else ""
    # two lines: in one, the title is wider than the axes the legend leaves it and is cut at the figure's edge
    style(ax, title=f"Process vs outcome: best-of-N on {bon.get('problems', '?')} problems\n95% Wilson bars{star}")
    return fig


def process_vs_outcome_png(bon: dict[str, Any]) -> bytes | None:
    """``process_vs_outcome_figure`` as PNG bytes (the house style: ``report.figstyle``)."""
    from posttrainlab.report.figstyle import rendered

    return rendered(process_vs_outcome_figure(bon))


def read_bon(run_root: str | Path) -> dict[str, Any]:
    """``bon.json`` of a best-of-N folder, or of a run folder's ``best-of-n/``; ``{}`` when absent or unreadable."""
    from posttrainlab.data.jsonl import json_object_or_empty

    root = Path(run_root)
    return json_object_or_empty(root / BON) or json_object_or_empty(RunLayout(root).best_of_n / BON)


def figures(run_root: str | Path) -> dict[str, bytes]:
    """``{IMAGE: PNG}`` when the run's best-of-N has an ORM, else ``{}`` (for ``report_files/``)."""
    png = process_vs_outcome_png(read_bon(run_root))
    return {} if png is None else {IMAGE: png}


def _paired_rows(bon: dict[str, Any]) -> list[list[str]]:
    rows = []
    for pair in sub(bon, "paired").values():
        a, b = pair.get("a", "?"), pair.get("b", "?")
        for n, s in sorted(sub(pair, "by_n").items(), key=lambda kv: int(kv[0])):
            rows.append([f"{label(b, bon)} − {label(a, bon)}", n, pct(s["acc_a"]), pct(s["acc_b"]),
                         points(s["diff"], s["ci"]), str(s["b"]), str(s["c"]), p_value(s["mcnemar_p"])])  # fmt: skip
    return rows


def blocks(run_root: str | Path, images: list[str] | None = None) -> list[Block]:
    """The section as report blocks (``[]`` without an ORM); ``images``: the plots that exist (default: this one)."""
    bon = read_bon(run_root)
    names = curves(bon)
    if "orm" not in names:
        return []
    ns = [str(n) for n in bon.get("ns", [])]
    prm = prm_selector(bon)
    who = (f"the PRM ({bon.get('prm', '?')}) and the ORM ({bon.get('orm', '?')})" if prm in names else
           f"the ORM ({bon.get('orm', '?')}), given as the PRM")  # fmt: skip
    out = [
        heading("Process vs outcome supervision: best-of-N"),
        paragraph(
            f"{bon.get('problems', '?')} {bon.get('split', 'test')} problems, N samples each from the policy "
            f"(temperature {sub(bon, 'sampling').get('temperature', '?')}), scored once by {who}. The PRM is trained "
            "on step labels, the ORM on outcome labels (the solution's final answer right or wrong) of the same "
            "policy samples, so the two differ in their labels only (Lightman et al. 2023, Figure 3). One pick per "
            f"problem at each N: the PRM's highest {prm[4:]} step score, the ORM's highest score (its last step's), "
            "majority vote, and the PRM- and ORM-weighted votes; every N uses the first N of the same samples, so "
            "the curves are paired across N and across selectors. Bars: 95% Wilson intervals."
        ),
        table(["selector", *[f"N={n}" for n in ns]],
              [[label(s, bon), *[with_ci(stat(sub(bon["selectors"][s], n))) for n in ns]] for s in names]
              + ([["oracle pass@N (any sample right)", *[with_ci(stat(sub(bon["oracle"], n))) for n in ns]]]
                 if sub(bon, "oracle") else [])),
    ]  # fmt: skip
    if IMAGE in (images if images is not None else [IMAGE]):
        out.append(image(IMAGE, "Best-of-N accuracy against N: PRM, ORM, majority vote and weighted votes"))
    rows = _paired_rows(bon)
    if rows:
        out += [
            heading("Paired at each N", 3),
            paragraph(
                "B − A in percentage points on the same problems, Newcombe's paired 95% interval, and McNemar's "
                "exact test on the problems only one side gets right (b: A right and B wrong; c: A wrong and B "
                "right). Significant means p < 0.05."
            ),
            table(["B − A", "N", "A", "B", "B − A [95% CI]", "b", "c", "McNemar p"], rows),
        ]
    pair = key_pair(bon)
    if pair and ns and ns[-1] in sub(pair, "by_n"):
        out.append(paragraph(f"At N = {ns[-1]}: {describe('PRM − ORM', pair['by_n'][ns[-1]])}."))
    return out


def section(run_root: Path) -> str:
    """The section as Markdown (``""`` without an ORM); its image is ``report_files/process_vs_outcome.png``."""
    found = blocks(run_root)
    return to_markdown(found) if found else ""


__all__ = ["IMAGE", "blocks", "curves", "figures", "process_vs_outcome_figure", "process_vs_outcome_png", "section"]

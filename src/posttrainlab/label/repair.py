"""Verify a judge's ``<HAL>`` annotation against its source, and repair one that drifted from it.

The SHARP annotator (seed 000, "Annotation") returns the solution verbatim with the minimal wrong
fragments in ``<HAL>…</HAL>``, or the literal ``No hallucinations``. A judge model does not always copy
verbatim: it collapses whitespace, swaps a quote character, drops a blank line, adds a full stop.
Every answer is checked here, in this order:

1. **unwrap**: a ``<think>…</think>`` block, surrounding whitespace and one enclosing code fence are
   removed (wrappers, not content);
2. **exact**: the literal ``No hallucinations`` (a trailing full stop tolerated), or markup that
   ``hal.parse_hal`` accepts and that gives the source back exactly when the tags are stripped;
3. **repair**: balanced markup whose clean text differs from the source is aligned to the source with
   ``difflib.SequenceMatcher`` (``autojunk=False``: the heuristic would drop frequent characters such
   as spaces and digits and misalign long solutions). Each tag is carried through the matching
   blocks. The repair is **rejected** when

   - the text inside a tag changed: the tag's characters do not all lie in one matching block (the
     judge rewrote, "corrected" or truncated the fragment it flagged, so where it points is unclear);
   - the match ratio ``2 M / (|answer| + |source|)`` is below :data:`MIN_RATIO` (0.95), or
   - a step (a blank-line-separated piece of the source) has less than :data:`MIN_STEP_COVERAGE`
     (half) of its characters matched.

Why 0.95. Outside the tags a difference changes no label (labels come from where the tags land in
the source), so cosmetic drift is harmless and worth keeping. What is not harmless is text the judge
did not reproduce: a step it never copied is a step it may never have judged, and reading it as
"no ``<HAL>`` here, so correct" would silently mark it clean. For an answer that drops a share f of
the source and is otherwise exact, ``ratio = 2(1 - f) / (2 - f)``: 0.974 at f = 5 %, 0.947 at
f = 10 %. So 0.95 accepts any amount of the cosmetic drift judges show (a few characters in a few
hundred: ratio > 0.98) and refuses an answer that lost about a tenth of the text or more. A short
dropped step (the ``Answer: 5`` line of a long solution, ~3 % of it) passes the ratio, which is why
the per-step coverage rule stands beside it.

Spans are then normalised: surrounding whitespace is trimmed from each span (never changing which
non-blank characters are marked) and a span of whitespace only is dropped. After trimming no span
starts or ends inside a blank-line separator, so the span view can be written piece by piece
(:func:`annotation_pieces`).

Written by hand: the rules are SHARP's (no library checks ``<HAL>`` markup), and difflib is the
standard library's aligner.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from posttrainlab.data.formats.hal import (
    CLOSE,
    NO_HALLUCINATIONS,
    OPEN,
    HalMarkupError,
    Span,
    check_spans,
    diff_at,
    parse_hal,
    piece_bounds,
)
from posttrainlab.data.formats.sharp import STEP_SEP  # the separator between the steps the judge annotates

#: Least ``SequenceMatcher.ratio()`` of a repaired answer against its source (module docstring).
MIN_RATIO = 0.95
#: Least share of each source step's characters the answer must reproduce (module docstring).
MIN_STEP_COVERAGE = 0.5

_THINK = re.compile(r"<think>.*?</think>", re.S)
_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*\n(.*)\n```\Z", re.S)
_NO_HAL = re.compile(r"\A\W*no hallucinations?\W*\Z", re.I)


@dataclass(frozen=True)
class Verdict:
    """What one answer is worth.

    ``spans``: character spans into the source (``None`` when rejected); ``how``: ``"literal"`` (the
    no-hallucination literal), ``"exact"`` (verbatim markup), ``"repaired"`` (aligned) or ``"rejected"``;
    ``reason``: why it was rejected or what was repaired; ``ratio``: the alignment's match ratio (1.0
    when exact).
    """

    spans: list[Span] | None
    how: str
    reason: str | None = None
    ratio: float = 1.0

    @property
    def ok(self) -> bool:
        return self.spans is not None


def unwrap(answer: str) -> str:
    """The answer without a ``<think>`` block, surrounding whitespace or one enclosing code fence.

    >>> unwrap("<think>hmm</think>\\n```\\n2 + 2 = <HAL>5</HAL>\\n```\\n")
    '2 + 2 = <HAL>5</HAL>'
    """
    text = _THINK.sub("", answer)
    if "</think>" in text:  # the opening tag came with the prompt: keep what follows the close
        text = text.rsplit("</think>", 1)[1]
    text = text.strip()
    m = _FENCE.match(text)
    return m.group(1).strip() if m else text


def is_no_hallucinations(text: str) -> bool:
    """The annotator's clean literal, tolerating case and punctuation around it.

    >>> is_no_hallucinations("No hallucinations."), is_no_hallucinations("**No hallucinations**")
    (True, True)
    >>> is_no_hallucinations("No hallucinations, but step 2 is odd")
    False
    """
    return text == NO_HALLUCINATIONS or bool(_NO_HAL.match(text))


def trim_spans(text: str, spans: Sequence[Span]) -> list[Span]:
    """Each span without surrounding whitespace; whitespace-only spans dropped.

    >>> trim_spans("a = 5 \\n\\nb", [(3, 6), (6, 8)])
    [(4, 5)]
    """
    out = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            out.append((start, end))
    return out


def align_spans(
    answer_clean: str,
    spans: Sequence[Span],
    source: str,
    *,
    min_ratio: float = MIN_RATIO,
    min_step_coverage: float = MIN_STEP_COVERAGE,
    sep: str = STEP_SEP,
) -> tuple[list[Span] | None, str, float]:
    """Carry ``spans`` (offsets into ``answer_clean``) onto ``source``: ``(spans or None, reason, ratio)``.

    >>> source = "12 * 4 = 48\\n\\n48 + 7 = 56\\n\\nAnswer: 56"
    >>> align_spans("12 * 4 = 48\\n48 + 7 = 56\\n\\nAnswer: 56", [(21, 23)], source)[0]   # a lost newline
    [(22, 24)]
    >>> align_spans("12 * 4 = 48\\n\\n48 + 7 = 55\\n\\nAnswer: 56", [(22, 24)], source)[:2]
    (None, "the text inside tag 1 ('55') is not in the source as written")
    """
    sm = SequenceMatcher(None, answer_clean, source, autojunk=False)
    blocks = [b for b in sm.get_matching_blocks() if b.size]
    matched = sum(b.size for b in blocks)
    total = len(answer_clean) + len(source)
    ratio = 2 * matched / total if total else 1.0
    mapped: list[Span] = []
    for k, (start, end) in enumerate(spans, start=1):
        block = next((b for b in blocks if b.a <= start and end <= b.a + b.size), None)
        if block is None:
            fragment = answer_clean[start:end]
            return None, f"the text inside tag {k} ({fragment[:60]!r}) is not in the source as written", ratio
        mapped.append((block.b + start - block.a, block.b + end - block.a))
    if ratio < min_ratio:
        return None, f"match ratio {ratio:.3f} < {min_ratio} (the answer does not reproduce the solution)", ratio
    covered = [0] * len(source)
    for b in blocks:
        covered[b.b : b.b + b.size] = [1] * b.size
    pieces = source.split(sep)
    for k, (a, b) in enumerate(piece_bounds(pieces, sep)):
        if b > a and sum(covered[a:b]) < min_step_coverage * (b - a):
            return None, f"step {k} is mostly missing from the answer ({sum(covered[a:b])} of {b - a} chars)", ratio
    reason = check_spans(mapped, len(source))
    if reason is not None:  # two tags mapped onto overlapping text: not a markup we can trust
        return None, f"repaired tags clash: {reason}", ratio
    return mapped, f"aligned to the source (first difference at char {diff_at(answer_clean, source)})", ratio


def verify(
    answer: str | None,
    source: str,
    *,
    min_ratio: float = MIN_RATIO,
    min_step_coverage: float = MIN_STEP_COVERAGE,
    sep: str = STEP_SEP,
) -> Verdict:
    """Check one answer against ``source`` and repair it when it can be (module docstring).

    >>> verify("No hallucinations", "2 + 2 = 4").how
    'literal'
    >>> verify("2 + 2 = <HAL>5</HAL>", "2 + 2 = 5").spans
    [(8, 9)]
    >>> v = verify("2 + 2 = 4\\n\\n4 * 3 = <HAL>13</HAL>.", "2 + 2 = 4\\n\\n4 * 3 = 13"); v.how, v.spans
    ('repaired', [(19, 21)])
    >>> verify("2 + 2 = <HAL>4</HAL>", "2 + 2 = 5").how
    'rejected'
    """
    if answer is None or not answer.strip():
        return Verdict(None, "rejected", "empty answer", 0.0)
    text = unwrap(answer)
    if is_no_hallucinations(text):
        return Verdict([], "literal")
    try:
        clean, spans = parse_hal(text)
    except HalMarkupError as e:
        return Verdict(None, "rejected", f"bad markup: {e}", 0.0)
    if clean == source:
        return Verdict(trim_spans(source, spans), "exact")
    mapped, reason, ratio = align_spans(
        clean, spans, source, min_ratio=min_ratio, min_step_coverage=min_step_coverage, sep=sep
    )
    if mapped is None:
        return Verdict(None, "rejected", reason, ratio)
    return Verdict(trim_spans(source, mapped), "repaired", reason, ratio)


def annotation_pieces(pieces: Sequence[str], spans: Sequence[Span], sep: str = STEP_SEP) -> list[str]:
    """The span view's ``hallucination_annotation``: ``sep.join(pieces)`` with the tags, cut back into pieces.

    ``spans`` (sorted, non-overlapping offsets into the joined text) must not start or end inside a
    separator, which :func:`trim_spans` guarantees for stripped pieces. A span running across pieces
    opens in one piece and closes in a later one, which ``hal.parse_hal_pieces`` reads back as the
    same span.

    >>> annotation_pieces(["a = 1", "b = 5"], [(4, 5), (11, 12)])
    ['a = <HAL>1</HAL>', 'b = <HAL>5</HAL>']
    >>> annotation_pieces(["a = 1", "b = 5"], [(4, 8)])
    ['a = <HAL>1', 'b</HAL> = 5']
    """
    bounds = piece_bounds(pieces, sep)
    reason = check_spans(spans, bounds[-1][1] if bounds else 0)
    if reason is not None:
        raise HalMarkupError(reason)
    for start, end in spans:
        for k in range(len(bounds) - 1):
            gap_start, gap_end = bounds[k][1], bounds[k + 1][0]
            if gap_start <= start < gap_end or gap_start < end <= gap_end and end != gap_start:
                raise HalMarkupError(f"span ({start}, {end}) starts or ends inside the separator after piece {k}")
    out = []
    for piece, (a, b) in zip(pieces, bounds, strict=True):
        # tags inside this piece: "</HAL>" at an end in (a, b], "<HAL>" at a start in [a, b); a close
        # sorts before an open at the same offset (two touching spans)
        tags = [(e, 0, CLOSE) for _, e in spans if a < e <= b] + [(s, 1, OPEN) for s, _ in spans if a <= s < b]
        parts, pos = [], a
        for offset, _, tag in sorted(tags):
            parts += [piece[pos - a : offset - a], tag]
            pos = offset
        parts.append(piece[pos - a :])
        out.append("".join(parts))
    return out


__all__ = [
    "MIN_RATIO",
    "MIN_STEP_COVERAGE",
    "Verdict",
    "align_spans",
    "annotation_pieces",
    "is_no_hallucinations",
    "trim_spans",
    "verify",
]

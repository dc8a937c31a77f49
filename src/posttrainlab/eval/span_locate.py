"""Locating a judge's copied span in the response it judged.

A judge is asked to copy the erroneous text verbatim, but models re-space, re-wrap and slightly edit
what they copy. :func:`locate_span` tries, in order, and returns the first hit as
``SpanMatch(start, end, method)`` with ``response[start:end]`` the located text:

1. ``exact``: the first occurrence of the span (``str.find``);
2. ``whitespace``: the first occurrence when every whitespace character is ignored on both sides
   ("3+4 = 7" finds "3 + 4 =\\n7"), mapped back to offsets in the original response;
3. ``fuzzy``: the best approximate match by :class:`difflib.SequenceMatcher` ratio (:func:`match_ratio`),
   also with whitespace ignored, accepted when the ratio is at least :data:`FUZZY_MIN_RATIO` and the
   span has at least :data:`FUZZY_MIN_CHARS` non-whitespace characters. "Best" is the best of a set of
   candidate windows (``_fuzzy``), which includes every line: the match scores at least as well as each
   line of the response (each step, where steps are lines, as in ``span_metrics``), even when the steps
   share a template and one global alignment would anchor on the wrong one. Scoring every window would
   cost O(n^2) alignments; the candidates are at most one per line plus a few.

It returns ``None`` when nothing matches. :func:`locate_spans` locates a whole list and keeps the
spans that could not be located, so that callers count and show them instead of dropping them.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import NamedTuple, Protocol

# Edit tolerance of the fuzzy step. SequenceMatcher's ratio is 2M / (len(a) + len(b)) with M the matched
# characters (whitespace ignored here). Measured on 20 hand-written Math-Shepherd-style steps (whole steps
# and half steps, 5 solutions): a copy with one number changed scored 0.93-0.99, a copy with one word
# dropped 0.69-1.0 (median 0.97); a step absent from the response scored at most 0.58 against another
# problem's solution, but up to 0.87 against the other steps of its own solution when they share a
# template ("travels 60 miles per hour for 3 hours" / "travels 40 miles per hour for 2 hours"). 0.9 sits
# above every absent step: a span that fails is counted and shown as unlocated, while a false hit would
# silently move the prediction to a step the judge never quoted, so the threshold errs towards failing.
# Those numbers come from the earlier search (windows around one global alignment); the best-window search
# can only score higher, so an absent step that differs from a present one by a number or two (which no
# ratio tells from a copy with one number changed) is located a little more often: 374 against 317 of
# 1,994 synthetic absent templated steps.
FUZZY_MIN_RATIO = 0.9
# Below this many non-whitespace characters one edit is a large share of the span and short strings
# ("x = 5", "12") recur by chance, so a fuzzy hit would be noise: short spans must match exactly or
# up to whitespace.
FUZZY_MIN_CHARS = 10
# How many alignment anchors (the diagonals most shared 3-grams vote for) the fuzzy step tries.
_FUZZY_ANCHORS = 8
# Length of the shared substrings that vote for an alignment; a 3-gram seen more often than this in the
# response (a run of one character, a repeated "000") says nothing about where the span is and is skipped.
_QGRAM = 3
_QGRAM_MAX_HITS = 64


class SpanMatch(NamedTuple):
    """A located span: ``response[start:end]``, found by ``method`` (exact, whitespace or fuzzy)."""

    start: int
    end: int
    method: str


class SpanLocator(Protocol):
    """The span locator role: ``locator(response, span) -> SpanMatch | None``."""

    def __call__(self, response: str, span: str) -> SpanMatch | None: ...


def _strip_whitespace(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, and for each kept character its offset in ``text``."""
    offsets = [i for i, ch in enumerate(text) if not ch.isspace()]
    return "".join(text[i] for i in offsets), offsets


def match_ratio(text: str, span: str) -> float:
    """The fuzzy step's score of ``text`` as a copy of ``span``: their ``SequenceMatcher`` ratio with
    whitespace ignored (``text`` first: the ratio is not symmetric).

    >>> round(match_ratio("x = 10 + 2", "x=10+3"), 3)   # 5 of 6 characters match: 2 * 5 / 12
    0.833
    """
    return SequenceMatcher(None, _strip_whitespace(text)[0], _strip_whitespace(span)[0], autojunk=False).ratio()


def _anchors(haystack: str, needle: str, slack: int) -> list[int]:
    """Where a window copying ``needle`` probably starts, best first: the diagonals (haystack offset minus
    needle offset) with the most shared 3-grams within ``slack`` of them (an edit shifts the diagonal by
    a few characters), each at least ``slack`` from those before it."""
    where: dict[str, list[int]] = {}
    for i in range(len(haystack) - _QGRAM + 1):
        where.setdefault(haystack[i : i + _QGRAM], []).append(i)
    votes: Counter[int] = Counter()
    for j in range(len(needle) - _QGRAM + 1):
        hits = where.get(needle[j : j + _QGRAM], ())
        if len(hits) <= _QGRAM_MAX_HITS:
            votes.update(i - j for i in hits)
    diagonals = sorted(votes)
    near: dict[int, int] = {}
    lo = hi = total = 0
    for d in diagonals:  # votes within [d - slack, d + slack], two pointers over the sorted diagonals
        while hi < len(diagonals) and diagonals[hi] <= d + slack:
            total, hi = total + votes[diagonals[hi]], hi + 1
        while diagonals[lo] < d - slack:
            total, lo = total - votes[diagonals[lo]], lo + 1
        near[d] = total
    picked: list[int] = []
    for d in sorted(diagonals, key=lambda d: (-near[d], -votes[d], d)):
        if all(abs(d - p) > slack for p in picked):
            picked.append(d)
            if len(picked) == _FUZZY_ANCHORS:
                break
    return picked


def _fuzzy(haystack: str, needle: str, bounds: Sequence[int], floor: float) -> tuple[float, int, int] | None:
    """Best (ratio, start, end) of a candidate window of ``haystack`` against ``needle`` scoring at least
    ``floor`` (``None`` when none does); ties go to the earliest. ``bounds`` are the line starts (and the
    end) in ``haystack``.

    Candidates: (1) every line (every step of a response whose steps are its lines) long enough and
    short enough to reach ``floor``; (2) at each of the diagonals that the most shared 3-grams vote for, a
    window of the needle's length plus a tenth either side (a span copied from inside a step, or across
    steps); (3) the windows of (1) and (2) realigned locally and trimmed to their matched extent. So the
    result scores at least as well as each line, whatever one global alignment would prefer. A window is
    aligned only when an upper bound of its score (``real_quick_ratio``, ``quick_ratio``) can beat the
    best so far. Cost: the lines that pass the length test are at most ``n / (0.8 m)`` windows of about
    ``m`` characters, plus 8 anchors, so about as much as one global alignment (``n m``); the 3-gram
    votes are linear in ``n`` and ``m``. (Runs of several lines are left to the anchors: there can be
    ``m / line length`` times more of them than lines.)
    """
    if not haystack or not needle:
        return None
    n, m = len(haystack), len(needle)
    matcher = SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(needle)  # caches the needle's index: every window below reuses it
    best: tuple[float, int, int] | None = None

    def bar() -> float:
        return floor if best is None else best[0]

    def score(start: int, end: int) -> None:
        nonlocal best
        if end <= start:
            return
        matcher.set_seq1(haystack[start:end])
        if matcher.real_quick_ratio() < bar() or matcher.quick_ratio() < bar():
            return
        ratio = matcher.ratio()
        if best is None and ratio >= floor or best is not None and (ratio, -start) > (best[0], -best[1]):
            best = (ratio, start, end)

    def score_trimmed(lo: int, hi: int) -> None:
        # A trimmed window keeps M <= Q matches (Q: the characters the two share, counted by quick_ratio)
        # and is at least M long, so it scores at most 2M / (M + m) <= 2Q / (Q + m): skip it when that loses.
        if hi <= lo:
            return
        matcher.set_seq1(haystack[lo:hi])
        shared = matcher.quick_ratio() * (hi - lo + m) / 2
        if 2 * shared / (shared + m) < bar() - 1e-9:  # the tolerance absorbs the rounding of quick_ratio
            return
        matched = [b for b in matcher.get_matching_blocks() if b.size]
        if matched:
            score(lo + matched[0].a, lo + matched[-1].a + matched[-1].size)

    # ratio <= 2 min(L, m) / (L + m): a window of length L outside [m f / (2 - f), m (2 - f) / f] scores < f
    shortest, longest = m * floor / (2 - floor), m * (2 - floor) / floor
    # trimming only shortens a window: a line too short to reach floor cannot reach it trimmed either
    lines = [(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True) if shortest <= hi - lo <= longest]
    for lo, hi in lines:
        score(lo, hi)
    slack = max(1, m // 10)
    for anchor in _anchors(haystack, needle, slack):
        score_trimmed(max(0, anchor - slack), min(n, anchor + m + slack))
    for lo, hi in lines:
        score_trimmed(lo, hi)
    return best


def locate_span(response: str, span: str) -> SpanMatch | None:
    """Find ``span`` in ``response``: exact, then ignoring whitespace, then fuzzy (module docstring).

    An empty or all-whitespace span is never located.

    >>> r = "Step 1: 3 + 4 = 7\\nStep 2: 7 * 2 = 15"
    >>> locate_span(r, "7 * 2 = 15")
    SpanMatch(start=26, end=36, method='exact')
    >>> locate_span(r, "7*2=15")
    SpanMatch(start=26, end=36, method='whitespace')
    >>> locate_span(r, "Step 2: 7 x 2 = 15")
    SpanMatch(start=18, end=36, method='fuzzy')
    >>> locate_span(r, "9 / 3 = 3") is None
    True
    """
    if not span.strip():
        return None
    i = response.find(span)
    if i >= 0:
        return SpanMatch(i, i + len(span), "exact")
    hay, offsets = _strip_whitespace(response)
    needle, _ = _strip_whitespace(span)
    j = hay.find(needle)
    if j >= 0:
        return SpanMatch(offsets[j], offsets[j + len(needle) - 1] + 1, "whitespace")
    if len(needle) < FUZZY_MIN_CHARS:
        return None
    # Line starts in ``hay``: the steps of a response are its lines (span_metrics joins them with "\n").
    line_starts = [0] + [i + 1 for i, ch in enumerate(response) if ch == "\n"]
    bounds = sorted({bisect_left(offsets, p) for p in line_starts} | {len(hay)})
    found = _fuzzy(hay, needle, bounds, FUZZY_MIN_RATIO)
    if found is None:
        return None
    _, start, end = found
    return SpanMatch(offsets[start], offsets[end - 1] + 1, "fuzzy")


@dataclass(frozen=True)
class LocatedSpans:
    """Every span of one list with its match (``None`` when unlocated), in the list's order."""

    spans: tuple[str, ...]
    matches: tuple[SpanMatch | None, ...]

    @property
    def unlocated(self) -> tuple[str, ...]:
        """The spans that could not be located, in the list's order."""
        return tuple(s for s, m in zip(self.spans, self.matches, strict=True) if m is None)

    @property
    def earliest(self) -> SpanMatch | None:
        """The located match that starts first in the response (the shorter one on a tie), or ``None``."""
        found = [m for m in self.matches if m is not None]
        return min(found, key=lambda m: (m.start, m.end)) if found else None


def locate_spans(response: str, spans: Sequence[str], locator: SpanLocator = locate_span) -> LocatedSpans:
    """Locate every span of a judge's list in ``response``.

    >>> found = locate_spans("a = 1\\nb = 3", ["b = 3", "c = 9", "a = 1"])
    >>> found.earliest, found.unlocated
    (SpanMatch(start=0, end=5, method='exact'), ('c = 9',))
    """
    return LocatedSpans(tuple(spans), tuple(locator(response, s) for s in spans))

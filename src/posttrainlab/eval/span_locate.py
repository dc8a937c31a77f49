"""Locating a judge's copied span in the response it judged.

A judge is asked to copy the erroneous text verbatim, but models re-space, re-wrap and slightly edit
what they copy. :func:`locate_span` tries, in order, and returns the first hit as
``SpanMatch(start, end, method)`` with ``response[start:end]`` the located text:

1. ``exact``: the first occurrence of the span (``str.find``);
2. ``whitespace``: the first occurrence when every whitespace character is ignored on both sides
   ("3+4 = 7" finds "3 + 4 =\\n7"), mapped back to offsets in the original response;
3. ``fuzzy``: the best approximate match by :class:`difflib.SequenceMatcher` ratio, also with whitespace
   ignored, accepted when the ratio is at least :data:`FUZZY_MIN_RATIO` and the span has at least
   :data:`FUZZY_MIN_CHARS` non-whitespace characters.

It returns ``None`` when nothing matches. :func:`locate_spans` locates a whole list and keeps the
spans that could not be located, so that callers count and show them instead of dropping them.
"""

from __future__ import annotations

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
FUZZY_MIN_RATIO = 0.9
# Below this many non-whitespace characters one edit is a large share of the span and short strings
# ("x = 5", "12") recur by chance, so a fuzzy hit would be noise: short spans must match exactly or
# up to whitespace.
FUZZY_MIN_CHARS = 10
# How many alignment anchors (the largest matching blocks) the fuzzy step tries.
_FUZZY_ANCHORS = 8


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


def _fuzzy(haystack: str, needle: str) -> tuple[float, int, int] | None:
    """Best (ratio, start, end) of a window of ``haystack`` against ``needle``; ties go to the earliest.

    Anchors come from the largest matching blocks of one global alignment; around each, the window is the
    needle's length plus a tenth either side, realigned locally and trimmed to its matched extent.
    """
    if not haystack or not needle:
        return None
    blocks = SequenceMatcher(None, haystack, needle, autojunk=False).get_matching_blocks()
    blocks = sorted((b for b in blocks if b.size), key=lambda b: -b.size)[:_FUZZY_ANCHORS]
    slack = max(1, len(needle) // 10)
    best: tuple[float, int, int] | None = None
    for anchor in sorted({b.a - b.b for b in blocks}):
        lo = max(0, anchor - slack)
        hi = min(len(haystack), anchor + len(needle) + slack)
        local = SequenceMatcher(None, haystack[lo:hi], needle, autojunk=False).get_matching_blocks()
        matched = [b for b in local if b.size]
        if not matched:
            continue
        start, end = lo + matched[0].a, lo + matched[-1].a + matched[-1].size
        ratio = SequenceMatcher(None, haystack[start:end], needle, autojunk=False).ratio()
        if best is None or ratio > best[0] or (ratio == best[0] and start < best[1]):
            best = (ratio, start, end)
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
    found = _fuzzy(hay, needle)
    if found is None or found[0] < FUZZY_MIN_RATIO:
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

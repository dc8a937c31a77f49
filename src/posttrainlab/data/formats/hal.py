"""``<HAL>…</HAL>`` markup: annotated text <-> (clean text, character spans).

The SHARP annotator (seed 000, "Annotation") returns the solution verbatim with the *minimal* wrong
fragments wrapped in ``<HAL>…</HAL>``, or the literal ``No hallucinations`` for a clean solution. An
annotation is only usable when removing the tags gives the source text back exactly, the tags are
balanced, no span is nested in another and no span is empty (an empty span marks no character, so the
step it belongs to would be a matter of taste). ``parse_hal`` enforces all of that and ``insert_hal``
is its exact inverse: ``parse_hal(insert_hal(text, spans)) == (text, spans)``.

Spans are half-open ``(start, end)`` character offsets into the clean text, sorted, non-overlapping.
Two spans may touch (``<HAL>a</HAL><HAL>b</HAL>``); they stay two spans.

The span view stores an annotation as a list of pieces (the solution split on blank lines), and a
span may open in one piece and close in a later one. ``parse_hal_pieces`` reads such a list as one
text joined by a separator and ``touched_pieces`` says which pieces each span touches: every piece
from the one holding the opening tag to the one holding the closing tag.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

OPEN = "<HAL>"
CLOSE = "</HAL>"
#: What the annotator returns for a solution with no error (seed 000, "Annotation").
NO_HALLUCINATIONS = "No hallucinations"

Span = tuple[int, int]

_TAG = re.compile(r"</?HAL>")


class HalMarkupError(ValueError):
    """The markup is unbalanced, nested, empty or does not match its source text."""


def parse_hal(text: str) -> tuple[str, list[Span]]:
    """Split annotated text into its clean text and the character spans of its ``<HAL>`` tags.

    >>> parse_hal("x = <HAL>15 * 2 / 3 = 5</HAL> bars")
    ('x = 15 * 2 / 3 = 5 bars', [(4, 18)])
    >>> parse_hal("no tags")
    ('no tags', [])
    >>> parse_hal("a <HAL>b")
    Traceback (most recent call last):
    ...
    posttrainlab.data.formats.hal.HalMarkupError: unclosed <HAL> at char 2
    """
    clean: list[str] = []
    spans: list[Span] = []
    pos = 0  # position in ``text``
    out = 0  # length of the clean text so far
    opened: int | None = None  # clean offset of the open span
    opened_at = 0  # raw offset of the open tag, for messages
    for m in _TAG.finditer(text):
        chunk = text[pos : m.start()]
        clean.append(chunk)
        out += len(chunk)
        pos = m.end()
        if m.group() == OPEN:
            if opened is not None:
                raise HalMarkupError(f"nested <HAL> at char {m.start()} (one is open since char {opened_at})")
            opened, opened_at = out, m.start()
        else:
            if opened is None:
                raise HalMarkupError(f"</HAL> without <HAL> at char {m.start()}")
            if out == opened:
                raise HalMarkupError(f"empty <HAL></HAL> span at char {opened_at}")
            spans.append((opened, out))
            opened = None
    if opened is not None:
        raise HalMarkupError(f"unclosed <HAL> at char {opened_at}")
    clean.append(text[pos:])
    return "".join(clean), spans


def strip_hal(text: str) -> str:
    """Remove every ``<HAL>``/``</HAL>`` tag without checking the markup.

    >>> strip_hal("<HAL>a</HAL> b </HAL>")
    'a b '
    """
    return _TAG.sub("", text)


def check_spans(spans: Sequence[Span], length: int) -> str | None:
    """The reason ``spans`` cannot be tags in a text of ``length`` characters, or ``None``.

    >>> check_spans([(0, 2), (1, 3)], 5)
    'span (1, 3) overlaps the span before it'
    """
    prev_end = 0
    for start, end in spans:
        if not (0 <= start < end <= length):
            return f"span ({start}, {end}) is empty or outside 0..{length}"
        if start < prev_end:
            return f"span ({start}, {end}) overlaps the span before it"
        prev_end = end
    return None


def insert_hal(text: str, spans: Sequence[Span]) -> str:
    """Wrap each span of ``text`` in ``<HAL>…</HAL>``; the exact inverse of ``parse_hal``.

    >>> insert_hal("x = 15 bars", [(4, 6)])
    'x = <HAL>15</HAL> bars'
    >>> insert_hal("ab", [(0, 1), (1, 2)])
    '<HAL>a</HAL><HAL>b</HAL>'
    """
    reason = check_spans(spans, len(text))
    if reason is not None:
        raise HalMarkupError(reason)
    if _TAG.search(text):
        raise HalMarkupError("the text already holds a <HAL> or </HAL> tag")
    parts: list[str] = []
    pos = 0
    for start, end in spans:
        parts += [text[pos:start], OPEN, text[start:end], CLOSE]
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def annotation_spans(annotation: str, source: str) -> list[Span]:
    """The spans of an annotation of ``source``, checking that it reproduces ``source`` exactly.

    The literal ``No hallucinations`` is a clean annotation of any source.

    >>> annotation_spans("No hallucinations", "2 + 2 = 4")
    []
    >>> annotation_spans("2 + 2 = <HAL>5</HAL>", "2 + 2 = 5")
    [(8, 9)]
    >>> annotation_spans("2 + 2 = <HAL>4</HAL>", "2 + 2 = 5")
    Traceback (most recent call last):
    ...
    posttrainlab.data.formats.hal.HalMarkupError: without tags it differs from the source at char 8
    """
    if annotation == NO_HALLUCINATIONS:
        return []
    clean, spans = parse_hal(annotation)
    if clean != source:
        raise HalMarkupError(f"without tags it differs from the source at char {diff_at(clean, source)}")
    return spans


def check_hal(annotation: str, source: str) -> str | None:
    """The reason ``annotation`` is not a valid annotation of ``source``, or ``None``.

    >>> check_hal("<HAL>a <HAL>b</HAL></HAL>", "a b") is not None
    True
    >>> check_hal("a <HAL>b</HAL>", "a b") is None
    True
    """
    try:
        annotation_spans(annotation, source)
    except HalMarkupError as e:
        return str(e)
    return None


def piece_bounds(pieces: Sequence[str], sep: str) -> list[Span]:
    """``(start, end)`` of each piece inside ``sep.join(pieces)``.

    >>> piece_bounds(["ab", "c", ""], "\\n\\n")
    [(0, 2), (4, 5), (7, 7)]
    """
    bounds = []
    pos = 0
    for piece in pieces:
        bounds.append((pos, pos + len(piece)))
        pos += len(piece) + len(sep)
    return bounds


def parse_hal_pieces(pieces: Sequence[str], sep: str = "\n\n") -> tuple[list[str], list[Span]]:
    """Parse a list of annotated pieces as one text joined by ``sep``.

    Returns the clean pieces and the spans as offsets into ``sep.join(clean_pieces)``; a span may run
    across pieces. ``sep`` must hold no tag.

    >>> parse_hal_pieces(["a <HAL>b", "c</HAL> d"])
    (['a b', 'c d'], [(2, 6)])
    """
    if _TAG.search(sep):
        raise ValueError("the separator holds a <HAL> tag")
    for i, piece in enumerate(pieces):
        if not isinstance(piece, str):
            raise HalMarkupError(f"piece {i} is {type(piece).__name__}, expected a string")
    try:
        _, spans = parse_hal(sep.join(pieces))
    except HalMarkupError as e:
        raise HalMarkupError(_locate(str(e), pieces, sep)) from None
    return [strip_hal(piece) for piece in pieces], spans


def touched_pieces(spans: Sequence[Span], bounds: Sequence[Span]) -> list[bool]:
    """For each piece, whether a span touches it: overlaps it, or has a tag at its edge.

    Piece ``k`` spans ``[a, b]`` of the joined clean text (closed: a tag sitting right after the last
    character of a piece is in that piece). A span that opens at the end of one piece and closes at the
    start of a later one therefore marks both, and every piece between them.

    >>> touched_pieces([(2, 6)], piece_bounds(["a b", "c d", "e"], "\\n\\n"))
    [True, True, False]
    >>> touched_pieces([(3, 5)], piece_bounds(["a b", "c d"], "\\n\\n"))
    [True, True]
    """
    touched = [False] * len(bounds)
    k = 0
    for start, end in spans:  # spans are sorted, so one forward scan over the pieces suffices
        while k < len(bounds) and bounds[k][1] < start:
            k += 1
        j = k
        while j < len(bounds) and bounds[j][0] <= end:
            touched[j] = True
            j += 1
    return touched


def diff_at(a: str, b: str) -> int:
    """Index of the first character where ``a`` and ``b`` differ (the shorter length if one is a prefix).

    >>> diff_at("abc", "abd"), diff_at("ab", "abc")
    (2, 2)
    """
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))


def _locate(message: str, pieces: Sequence[str], sep: str) -> str:
    """Rewrite each 'char N' (an offset into the joined raw text) as 'char n of piece k'."""
    bounds = piece_bounds(pieces, sep)

    def where(m: re.Match) -> str:
        offset = int(m.group(1))
        for k, (start, end) in enumerate(bounds):
            if start <= offset <= end:
                return f"char {offset - start} of piece {k}"
        return m.group(0)

    return re.sub(r"char (\d+)", where, message)

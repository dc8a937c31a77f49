"""Where each step's **result** lies in the PRM's token sequence: the tokens the baseline verifier
(``prm.baseline``) and the ``result`` head (``prm.heads.ResultHead``) read the policy's probability of.

- the result of ``a op b = c`` is ``c``; of ``Answer: N`` it is ``N``; a line of any other shape is read whole
  (the probability of writing that line, e.g. arith-prm's ``(no answer)`` step);
- a step's result tokens are those whose characters overlap the result (a token holding the space before a number
  counts too, as the policy had to write it). The prompt's tokens have offsets (0, 0) and never overlap one.

No torch here: an ``Encoded`` (``prm.format.encode_solution(..., offsets=True)``) and the step strings are all
it needs. Written by hand: two regular expressions of arith-v1's step grammar (``data.arith.steps``) and a scan
of the tokenizer's offsets.
"""

from __future__ import annotations

from collections.abc import Sequence

from posttrainlab.data.arith.steps import ANSWER_LINE, CALC_LINE

#: ``segments`` value of a token that is no step's result
NO_STEP = -1


def result_span(step: str) -> tuple[int, int]:
    """Character span of a line's result: after ``=`` in a calculation, the integer of an answer line, else all.

    >>> result_span("94 * 3 = 282"), result_span("Answer: 282"), result_span("so it is 282")
    ((9, 12), (8, 11), (0, 12))
    """
    for pattern, group in ((CALC_LINE, 4), (ANSWER_LINE, 1)):
        m = pattern.fullmatch(step)
        if m:
            return m.span(group)
    return 0, len(step)


def result_tokens(enc, steps: Sequence[str]) -> list[list[int]]:
    """Per step, the positions of the tokens overlapping its result (``enc`` encoded with ``offsets=True``)."""
    if enc.offsets is None:
        raise ValueError("result_tokens needs the tokenizer's offsets (encode_solution(..., offsets=True))")
    out = []
    for step, (start, _end) in zip(steps, enc.step_spans, strict=True):
        a, b = result_span(step)
        out.append([t for t, (s, e) in enumerate(enc.offsets) if s < start + b and e > start + a])
    return out


def segments(enc, steps: Sequence[str], length: int | None = None) -> list[int]:
    """Per token of ``enc.input_ids[:length]``: the read position (``enc.separators[k]``) of the step whose result
    it is, else ``NO_STEP``. A step read beyond ``length`` (cut by ``max_length``) keeps no result token.

    The result head sums the log-probabilities of the tokens of one segment into the position they name.
    """
    length = len(enc.input_ids) if length is None else min(length, len(enc.input_ids))
    out = [NO_STEP] * length
    for k, positions in enumerate(result_tokens(enc, steps)):
        read = enc.separators[k]
        if read >= length:
            continue
        for t in positions:
            if 0 < t <= read:  # the first token has no prediction; a result token never follows its read position
                out[t] = read
    return out


__all__ = ["NO_STEP", "result_span", "result_tokens", "segments"]

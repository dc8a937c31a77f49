"""How a solution's text is cut into steps: the one table behind every ``--step-split`` flag.

:data:`STEP_SPLITS` maps each rule to the separator that joins its steps back into text:

- ``lines``: the non-empty lines, stripped (arith-v1's ``data.arith.steps.split_steps``); joined by ``"\\n"``;
- ``blank``: the blocks between blank lines, a line of only spaces or tabs counting as blank, stripped and empty
  blocks dropped; joined by ``"\\n\\n"``;
- ``paragraphs``: the blocks between ``"\\n\\n"``, stripped and empty blocks dropped; joined by ``"\\n\\n"``. It is
  ``blank`` except that a line of spaces does not end a block;
- ``auto``: ``blank`` when the text holds a blank line, else ``lines`` (no separator of its own: each text says
  which rule it used).

Each verb takes the rules that fit it: ``posttrain generate`` :data:`GENERATE_STEP_SPLITS` (SHARP's blank-line
steps, ``auto`` by default; docs/sharp-pipeline.md) and ``posttrain label mc`` :data:`MC_STEP_SPLITS` (a prefix is
continued after one separator, so its rule needs a fixed one; docs/mc-labelling.md).

Written by hand: the rules are the two pipelines' own.
"""

from __future__ import annotations

import re

from posttrainlab.errors import BadInput

#: Every step rule and the separator that joins its steps (``None``: ``auto`` picks ``blank`` or ``lines`` per text).
STEP_SPLITS: dict[str, str | None] = {"auto": None, "blank": "\n\n", "lines": "\n", "paragraphs": "\n\n"}
#: The rules of ``posttrain generate`` (SHARP generation) and of ``posttrain label mc``.
GENERATE_STEP_SPLITS = ("auto", "blank", "lines")
MC_STEP_SPLITS = ("lines", "paragraphs")

_BLANK = re.compile(r"\n[ \t]*\n")


def check_step_split(how: str, allowed: tuple[str, ...]) -> None:
    """``BadInput`` naming ``--step-split`` and the choices unless ``how`` is one of ``allowed``."""
    if how not in allowed:
        raise BadInput(f"--step-split {how!r}: choose one of {', '.join(allowed)}")


def cut_steps(text: str, how: str) -> tuple[list[str], str]:
    """``(steps, rule used)``: ``text`` cut by the rule ``how`` (module docstring; ``auto`` says which it used).

    >>> cut_steps("12 * 4 = 48\\nAnswer: 48", "auto")
    (['12 * 4 = 48', 'Answer: 48'], 'lines')
    >>> cut_steps("First, 12 * 4 = 48.\\nSo\\n \\n  the answer is 48. \\n\\n\\n", "auto")
    (['First, 12 * 4 = 48.\\nSo', 'the answer is 48.'], 'blank')
    >>> cut_steps("a\\nb\\n \\nc\\n\\nd", "paragraphs")
    (['a\\nb\\n \\nc', 'd'], 'paragraphs')
    """
    check_step_split(how, tuple(STEP_SPLITS))
    if how == "auto":
        how = "blank" if _BLANK.search(text.strip()) else "lines"
    if how == "lines":
        pieces = text.splitlines()
    elif how == "blank":
        pieces = _BLANK.split(text)
    else:
        pieces = text.split("\n\n")
    return [p.strip() for p in pieces if p.strip()], how


__all__ = ["GENERATE_STEP_SPLITS", "MC_STEP_SPLITS", "STEP_SPLITS", "check_step_split", "cut_steps"]

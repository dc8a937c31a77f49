r"""A PRM input in the policy's own format (``PRMSpec.input_format: policy``).

Qwen2.5-Math-PRM's layout (``prm.format.format_solution``) gives the backbone a sequence it never saw when it
was a policy: a ``\boxed{}`` system prompt, no task instruction, steps glued together by a new ``<extra_0>``
token. Here the PRM reads exactly what the policy read and wrote:

- the prompt the policy was sampled from: its chat template (``generation.prompts.encode_prompt``, generation
  prompt added) over one user message, ``spec.instruction + "\n\n" + question`` (arith-v1's prompt when the
  instruction is arith-v1's; the question alone when ``instruction`` is empty);
- then the steps as the policy writes them, one line each, every step followed by ``"\n"``, tokenized after
  the prompt by the BPE boundary rule of ``generation.prompts.encode_prefix`` (as if more text followed), so
  the ids are the ones a policy continuing this prefix would see;
- step k is read at the token that ends with its newline (no separator token is added, no embedding is
  new). That token and everything before it are the same whether the solution goes on or stops at step k,
  so scoring a whole solution in one pass equals scoring each prefix (tests/prm check it).

A step holding a line break, or an empty step, is refused (``ValueError``): it would not be one line. So is a
tokenization in which a newline is not the last character of a token (the step could not be read).

Written by hand: it is ``generation.prompts``' prompt and prefix, with the read positions a PRM needs.
"""

from __future__ import annotations

from posttrainlab.generation.prompts import as_messages, encode_prompt
from posttrainlab.prm.spec import PRMSpec

NEWLINE = "\n"
#: The stand-in first character of a next step (``generation.prompts.encode_prefix``'s, for the same reason).
NEXT_STEP = "x"


def policy_prompt(spec: PRMSpec, question: str) -> str:
    """The user message: the instruction, a blank line, the question (the question alone without instruction).

    >>> policy_prompt(PRMSpec(input_format="policy", instruction="Solve it."), "What is 2 + 3?")
    'Solve it.\\n\\nWhat is 2 + 3?'
    """
    return f"{spec.instruction}\n\n{question}" if spec.instruction else question


def policy_body(steps: list[str]) -> str:
    """The steps as the policy writes them, each followed by a newline.

    >>> policy_body(["2 + 3 = 5", "Answer: 5"])
    '2 + 3 = 5\\nAnswer: 5\\n'
    """
    for k, step in enumerate(steps):
        if "\n" in step or "\r" in step:
            raise ValueError(f"step {k} holds a line break; the policy format reads one line per step")
        if not step.strip():
            raise ValueError(f"step {k} is empty; the policy format reads one non-empty line per step")
    return "".join(step + NEWLINE for step in steps)


def _tokenize_body(tokenizer, body: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids and character offsets of ``body`` as they are before more text (``encode_prefix``'s rule)."""
    if not body:
        return [], []
    enc = tokenizer(body + NEXT_STEP, add_special_tokens=False, return_offsets_mapping=True)
    tail = list(tokenizer(NEXT_STEP, add_special_tokens=False)["input_ids"])
    ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
    if ids[-len(tail) :] == tail:
        return ids[: -len(tail)], offsets[: -len(tail)]
    enc = tokenizer(body, add_special_tokens=False, return_offsets_mapping=True)  # no clean boundary to keep
    return list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]


def encode_policy_solution(
    tokenizer, spec: PRMSpec, question: str, steps: list[str], *, offsets: bool = False
) -> tuple[list[int], list[int], list[tuple[int, int]], list[tuple[int, int]] | None]:
    """``prm.format.Encoded``'s fields in the policy format: ids (prompt, then steps), the position each step is
    read at (the token ending its newline), each step's character span, and (on request) token offsets.

    Spans and offsets are character positions in the steps' text (``policy_body``); the prompt's tokens get
    ``(0, 0)``, so span supervision never labels them.
    """
    body = policy_body(list(steps))
    prompt = encode_prompt(tokenizer, as_messages(policy_prompt(spec, question)))
    ids, offs = _tokenize_body(tokenizer, body)
    ends = {end: t for t, (_start, end) in enumerate(offs)}
    reads, spans, start = [], [], 0
    for k, step in enumerate(steps):
        newline = start + len(step)  # the character index of the step's newline
        t = ends.get(newline + 1)
        if t is None or not offs[t][0] <= newline:
            raise ValueError(f"step {k}: no token ends with its newline after tokenisation; cannot read the step")
        reads.append(len(prompt) + t)
        spans.append((start, newline))
        start = newline + 1
    return prompt + ids, reads, spans, [(0, 0)] * len(prompt) + [tuple(o) for o in offs] if offsets else None


__all__ = ["encode_policy_solution", "policy_body", "policy_prompt"]

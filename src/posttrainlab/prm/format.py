"""The PRM's input format: a solution (question and steps) as the one token sequence training and scoring read.

The format lives here once (``format_solution`` / ``encode_solution``): ``prm.examples`` labels exactly the
separators ``prm.scoring.PRM`` reads (docs/design.md "PRM conventions", Qwen2.5-Math-PRM's usage). One sequence
per solution, each step followed by the separator (default ``<extra_0>``, a special token, so tokenisation
splits on it):

- with a chat template (``spec.chat``): the tokenizer's template over
  ``[system: spec.system_prompt (omitted when empty), user: question,
  assistant: step_1 + SEP + step_2 + SEP + ... + step_n + SEP]``, no generation prompt, tokenised
  without added special tokens (the template writes them) — Qwen2.5-Math-PRM's own recipe;
- plain: ``question + "\\n" + step_1 + SEP + ... + step_n + SEP``, tokenised with the tokenizer's
  special tokens (a BOS where it adds one).
- ``spec.input_format == "policy"``: the policy's own prompt and lines, no separator (``prm.policy_format``).

Steps are used verbatim (not stripped). A question or step holding the separator text is refused:
the separator count would no longer name the steps. No torch here: a tokenizer is all it needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from posttrainlab.prm.spec import PRMSpec


@dataclass(frozen=True)
class Encoded:
    """A tokenised solution: ids, the index of each step's separator token, and (on request) offsets."""

    input_ids: list[int]
    separators: list[int]
    step_spans: list[tuple[int, int]]  # character span of each step's text in the formatted string
    offsets: list[tuple[int, int]] | None = None


def format_solution(tokenizer, spec: PRMSpec, question: str, steps: list[str]) -> tuple[str, list[tuple[int, int]]]:
    """The PRM input text of a solution and the character span of each step in it (module docstring).

    The one function that formats a solution: training labels and scoring read the same separators.
    """
    sep = spec.separator
    if sep in question:
        raise ValueError(f"the question contains the separator {sep!r}")
    for k, step in enumerate(steps):
        if sep in step:
            raise ValueError(f"step {k} contains the separator {sep!r}")
    body = "".join(step + sep for step in steps)
    if spec.chat:
        messages = [{"role": "system", "content": spec.system_prompt}] if spec.system_prompt else []
        messages += [{"role": "user", "content": question}, {"role": "assistant", "content": body}]
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        start = text.rfind(body)
        if start < 0:
            raise ValueError("the chat template does not copy the assistant turn verbatim; set chat_template=false")
    else:
        text = question + "\n" + body
        start = len(question) + 1
    spans = []
    for step in steps:
        spans.append((start, start + len(step)))
        start += len(step) + len(sep)
    return text, spans


def separator_id(tokenizer, separator: str) -> int | None:
    """The id of ``separator`` when the tokenizer reads it as one token, else ``None``."""
    ids = tokenizer.encode(separator, add_special_tokens=False)
    return ids[0] if len(ids) == 1 else None


def encode_solution(tokenizer, spec: PRMSpec, question: str, steps: list[str], *, offsets: bool = False) -> Encoded:
    """Tokenise ``format_solution``'s text; ``ValueError`` unless there is exactly one separator per step.

    ``spec.input_format == "policy"``: the policy's own prompt and lines instead (``prm.policy_format``).
    """
    if spec.input_format == "policy":
        from posttrainlab.prm.policy_format import encode_policy_solution

        return Encoded(*encode_policy_solution(tokenizer, spec, question, steps, offsets=offsets))
    text, spans = format_solution(tokenizer, spec, question, steps)
    enc = tokenizer(text, add_special_tokens=not spec.chat, return_offsets_mapping=offsets)
    ids = list(enc["input_ids"])
    sep_id = separator_id(tokenizer, spec.separator)
    seps = [i for i, t in enumerate(ids) if t == sep_id]
    if len(seps) != len(steps):
        raise ValueError(f"{len(steps)} steps but {len(seps)} separator tokens after tokenisation")
    return Encoded(ids, seps, spans, [tuple(o) for o in enc["offset_mapping"]] if offsets else None)


def ensure_separator(tokenizer, separator: str) -> bool:
    """Add ``separator`` as a special token when the tokenizer does not read it as one; True if added."""
    if separator_id(tokenizer, separator) is not None and separator in tokenizer.get_vocab():
        return False
    tokenizer.add_tokens([separator], special_tokens=True)
    return True


def chat_messages(tokenizer, spec: PRMSpec, messages: list[dict[str, str]]) -> list[int]:
    """Token ids of a judge-prompt row (Polaris MC ``messages``), ending where the verdict would be generated.

    A trailing assistant turn (the card's placeholder ``yes``) is dropped; with a chat template the
    generation prompt is added, so the last position's next-token logits are the verdict's.
    """
    turns = messages[:-1] if messages and messages[-1]["role"] == "assistant" else messages
    if spec.chat:
        text = tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=True)
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    text = "\n".join(t["content"] for t in turns) + "\n"
    return list(tokenizer(text)["input_ids"])

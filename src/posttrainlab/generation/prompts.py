"""Prompts as the model sees them: rendered, tokenized, and batched into left-padded tensors.

Every local backend and scorer goes through these, so a policy is sampled (``TransformersBackend``,
``generation.shared_prefix``, ``VLLMBackend``), scored (``eval.policy``) and served (``posttrain
serve``) on exactly the same tokens:

- **A dataset prompt as a chat** (``as_messages``): a string is one user message.
- **Rendered once, with the model's own chat template** (``add_generation_prompt=True``), so
  evaluation sees exactly the prompt format SFT trained on; a tokenizer without a chat template falls
  back to a plain role-prefixed prompt (``plain_chat``). ``add_generation_prompt`` and
  ``continue_final_message`` are ``apply_chat_template``'s (and vLLM's), for ``posttrain serve``.
- **A prefix the policy continues** (assistant text already written, ``shared_prefix.PrefixRequest``)
  is tokenized on its own and appended to the prompt's ids, by the BPE boundary rule of
  ``encode_prefix``; ``continuation_text`` is the same thing as one string, for a backend that takes
  text.
- **Batches sorted by prompt length** (longest first, ``length_sorted_batches``) so a batch holds
  prompts of similar length and little compute is spent on padding; the longest batch runs first, so
  a batch size that does not fit in memory fails at once, not at the end.
- **Left padding** with an attention mask (``left_pad``): every row's last prompt token sits at the
  same position, so the new tokens of all rows are generated in lockstep.

Hand-written because they are small and the same tokens must reach every backend; torch is imported
inside ``left_pad`` only.
"""

from __future__ import annotations

from posttrainlab.errors import BadInput
from posttrainlab.generation import Prompt


def as_messages(prompt: Prompt) -> Prompt:
    """A dataset prompt as a chat: a string is one user message, a message list is kept.

    >>> as_messages("What is 2 + 3?")
    [{'role': 'user', 'content': 'What is 2 + 3?'}]
    """
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt


def plain_chat(
    messages: list[dict], *, add_generation_prompt: bool = True, continue_final_message: bool = False
) -> str:
    """The fallback prompt for a tokenizer without a chat template: one ``role: content`` line each.

    ``continue_final_message``: the last message is left open (``role:`` then its text, as
    ``continuation_text`` writes an assistant prefix).

    >>> plain_chat([{"role": "user", "content": "What is 2 + 3?"}])
    'user: What is 2 + 3?\\nassistant:'
    >>> qa = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    >>> plain_chat(qa, continue_final_message=True), plain_chat(qa[:1], add_generation_prompt=False)
    ('user: Q\\nassistant:A', 'user: Q\\n')
    """
    if continue_final_message:
        *closed, last = messages
        return plain_chat(closed, add_generation_prompt=False) + f"{last['role']}:{last['content']}"
    return "".join(f"{m['role']}: {m['content']}\n" for m in messages) + ("assistant:" if add_generation_prompt else "")


def render_prompt(
    tokenizer, prompt: Prompt, *, add_generation_prompt: bool = True, continue_final_message: bool = False
) -> tuple[str, bool]:
    """The prompt text, and whether it came from the chat template (which then holds any bos token).

    The two options are ``apply_chat_template``'s (a string prompt is used as it is): both true is
    ``BadInput``, as a final message the template does not reproduce is for ``continue_final_message``.
    """
    if isinstance(prompt, str):
        return prompt, False
    if add_generation_prompt and continue_final_message:
        raise BadInput("continue_final_message and add_generation_prompt cannot both be true")
    if continue_final_message and not prompt:
        raise BadInput("continue_final_message: there is no final message to continue")
    options = {"add_generation_prompt": add_generation_prompt, "continue_final_message": continue_final_message}
    if getattr(tokenizer, "chat_template", None):
        try:
            return tokenizer.apply_chat_template(prompt, tokenize=False, **options), True
        except ValueError as e:  # e.g. a template that rewrites the final message it should continue
            raise BadInput(f"the chat template cannot render these messages: {e}") from None
    return plain_chat(prompt, **options), False


def encode_prompt(tokenizer, prompt: Prompt, **options) -> list[int]:
    """Token ids of a rendered prompt (special tokens added only where the chat template did not).

    ``options``: ``render_prompt``'s ``add_generation_prompt`` / ``continue_final_message``.
    """
    text, templated = render_prompt(tokenizer, prompt, **options)
    return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])


def continuation_text(tokenizer, prompt: Prompt, prefix: str) -> str:
    """The prompt rendered as the model sees it (chat template, assistant turn opened) with the prefix after it."""
    if tokenizer is None:
        return (prompt if isinstance(prompt, str) else plain_chat(prompt)) + prefix
    return render_prompt(tokenizer, prompt)[0] + prefix


#: A character that starts a pre-token of its own after whitespace in every byte-level BPE (GPT-2, Llama 3,
#: SmolLM2, Qwen2 regexes): appended to a prefix that ends in whitespace, then its tokens are dropped.
_NEXT_STEP = "x"


def encode_prefix(tokenizer, prefix: str) -> list[int]:
    """Token ids of ``prefix`` as they are inside the joined text ``prefix + next step`` (the BPE boundary rule).

    A BPE tokenizer reads trailing whitespace differently at the end of a string than before more text: SmolLM2's
    reads ``"15.\n\n"`` as ``[..., "ĊĊ"]`` but ``"15.\n\nStep 2"`` as ``[..., "Ċ", "Ċ", "Step", ...]``. A prefix
    that the policy continues ends at a step separator, and the next step starts with a non-space character, so the
    context the model should see is the second reading: the prefix is tokenized with a stand-in first character of
    the next step (``_NEXT_STEP``), whose tokens are then dropped. Prompt and prefix are tokenized apart (the
    prompt ends with the chat template's special tokens and a newline, a pre-token boundary in every such
    tokenizer). Tested on SmolLM2's tokenizer: prompt ids + ``encode_prefix(prefix)`` + ids of the rest of the trace
    equal the ids of the whole joined text, for line and paragraph step separators
    (tests/generation/test_shared_prefix_bpe.py). A served request (``posttrain serve``, vLLM) tokenizes the
    rendered text whole instead, as ``apply_chat_template(continue_final_message=True)`` does.
    """
    if not prefix:
        return []
    if not prefix[-1].isspace():
        return list(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    ids = list(tokenizer(prefix + _NEXT_STEP, add_special_tokens=False)["input_ids"])
    tail = list(tokenizer(_NEXT_STEP, add_special_tokens=False)["input_ids"])
    if ids[-len(tail) :] != tail:  # the stand-in merged with the whitespace: no clean boundary to keep
        return list(tokenizer(prefix, add_special_tokens=False)["input_ids"])
    return ids[: -len(tail)]


def length_sorted_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length, longest first (ties keep input order).

    >>> length_sorted_batches([3, 9, 5, 9, 1], 2)
    [[1, 3], [2, 0], [4]]
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def left_pad(sequences: list[list[int]], pad_id: int):
    """``(input_ids, attention_mask)`` long tensors, each row padded on the left to the longest.

    >>> ids, mask = left_pad([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [0, 0, 8]], [[1, 1, 1], [0, 0, 1]])
    """
    import torch

    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if seq:
            ids[row, width - len(seq) :] = torch.tensor(seq, dtype=torch.long)
            mask[row, width - len(seq) :] = 1
    return ids, mask


def right_pad(rows: list[list], fill, dtype=None):
    """One tensor ``[len(rows), longest row]``: each row's values first, ``fill`` after (``dtype`` default long).

    >>> right_pad([[5, 6, 7], [8]], fill=-1).tolist()
    [[5, 6, 7], [8, -1, -1]]
    """
    import torch

    dtype = torch.long if dtype is None else dtype
    out = torch.full((len(rows), max(len(r) for r in rows)), fill, dtype=dtype)
    for i, row in enumerate(rows):
        if len(row):
            out[i, : len(row)] = torch.tensor(row, dtype=dtype)
    return out


def right_pad_ids(sequences: list[list[int]], pad_id: int):
    """``(input_ids, attention_mask)`` long tensors, each row padded on the right to the longest (causal scoring and
    PRM training: a position never sees the padding after it, and rotary positions start at 0 in every row).

    >>> ids, mask = right_pad_ids([[5, 6, 7], [8]], pad_id=0)
    >>> ids.tolist(), mask.tolist()
    ([[5, 6, 7], [8, 0, 0]], [[1, 1, 1], [1, 0, 0]])
    """
    return right_pad(sequences, pad_id), right_pad([[1] * len(s) for s in sequences], 0)


__all__ = [
    "as_messages",
    "continuation_text",
    "encode_prefix",
    "encode_prompt",
    "left_pad",
    "length_sorted_batches",
    "plain_chat",
    "render_prompt",
    "right_pad",
    "right_pad_ids",
]

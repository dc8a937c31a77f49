"""A byte-level tokenizer for arith-v1 text, with a plain chat template.

Every byte is one token (256 ids) plus a few special tokens: no merges, so digits are always
single tokens, which is what a tiny model needs to learn column arithmetic, and any UTF-8 text
round-trips. Built with 🤗 ``tokenizers`` (ByteLevel pre-tokenizer and decoder, BPE with an
empty merge list) and saved as ``tokenizer.json`` so ``AutoTokenizer`` loads it like any Hub model.
"""

from __future__ import annotations

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>")
PAD, BOS, EOS, STEP = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<extra_0>"

#: ChatML without a system default: ``<|im_start|>{role}\n{content}<|im_end|>\n`` per message.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_tokenizer(model_max_length: int = 1024):
    """A ``PreTrainedTokenizerFast`` over bytes, with ChatML special tokens and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet, key=_byte_order))}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=None,
        model_max_length=model_max_length,
        padding_side="left",
        additional_special_tokens=[BOS, STEP],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map, the alphabet of the ByteLevel pre-tokenizer.

    Same construction as openai/gpt-2 ``encoder.py`` (printable Latin-1 bytes map to themselves, the
    rest to characters from U+0100 on).
    """
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


def _byte_order(ch: str) -> int:
    """Sort the ByteLevel alphabet by the byte each character stands for, so id == byte value."""
    return _CHAR_TO_BYTE[ch]


_CHAR_TO_BYTE = {v: k for k, v in bytes_to_unicode().items()}

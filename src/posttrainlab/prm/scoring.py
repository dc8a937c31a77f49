"""The scoring API: score solutions step by step with a process reward model (``posttrainlab.prm.PRM``).

    from posttrainlab.prm import PRM
    prm = PRM.from_pretrained("runs/prm-step")            # or a Qwen2.5-Math-PRM folder
    prm.score("What is 2 + 3?", ["2 + 3 = 5.", "Answer: 5"])   # -> [P(step 1 correct), P(step 2 correct)]
    prm.score_batch([(question, steps), ...], batch_size=16)

Hand-written because no library scores these checkpoints without remote code, and because the one
thing a PRM scorer must get right is reading exactly the positions training labelled: the format and
the heads come from ``prm.format`` (``encode_solution``) and ``prm.heads``, the same code the trainer uses.

**One pass per solution.** With a causal model the logits at step k's separator depend only on the
tokens up to it, so all steps of a solution are scored in one forward pass and the result equals
scoring each prefix separately (``score_prefixes``; tests/prm check it, bench/bench_prm_scoring.py
times it). A bidirectional encoder would let step k see later steps, so for one the scorer falls back
to one sequence per prefix. Batches are right-padded (causal positions never see the padding that
follows them; left padding would shift rotary positions) and sorted by length to waste little.

Torch and transformers are imported only when a model is loaded, so ``import posttrainlab.prm`` is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

from posttrainlab.errors import BadInput

__all__ = ["PRM"]


class PRM:
    """A loaded PRM: ``score(question, steps) -> list[float]``, one probability of "correct" per step."""

    def __init__(self, model, tokenizer, spec, device=None):
        import torch

        from posttrainlab.prm.heads import is_causal, make_head

        self.model, self.tokenizer, self.spec = model, tokenizer, spec
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.head = make_head(spec, tokenizer)
        self.one_pass = is_causal(model.config)

    @classmethod
    def from_pretrained(cls, path, dtype: str = "float32", device=None, trust_remote_code: bool = False) -> PRM:
        """Load a PRM folder or Hub id in any layout ``prm.loading.load_prm`` reads.

        ``device``: ``None`` picks CUDA when available, else the CPU. ``dtype``: float32, bfloat16,
        float16 or auto (the checkpoint's own); scores are computed in float32 from the logits.
        A checkpoint lacking a weight the model needs (its head, say) or holding one in another shape
        is ``BadInput`` naming them: scores come from the checkpoint's weights, never a random init.
        """
        import torch

        from posttrainlab.prm.loading import load_prm

        model, tokenizer, spec = load_prm(path, dtype=dtype, trust_remote_code=trust_remote_code)
        device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(model.to(device), tokenizer, spec, device)

    def score(self, question: str, steps: Sequence[str]) -> list[float]:
        """P(correct) of each step of one solution (one forward pass for a causal model)."""
        return self.score_batch([(question, steps)], batch_size=1)[0]

    def score_prefixes(self, question: str, steps: Sequence[str]) -> list[float]:
        """The slow reference: each prefix ``steps[:k+1]`` as its own sequence, read at its last separator."""
        return self.score_prefixes_batch([(question, steps)], batch_size=1)[0]

    def score_prefixes_batch(
        self, items: Sequence[tuple[str, Sequence[str]]], batch_size: int = 8
    ) -> list[list[float]]:
        """``score_prefixes`` for many solutions, ``batch_size`` prefix sequences per forward pass."""
        return self._score(items, batch_size=batch_size, one_pass=False)

    def score_batch(self, items: Sequence[tuple[str, Sequence[str]]], batch_size: int = 8) -> list[list[float]]:
        """``score`` for many ``(question, steps)`` pairs, ``batch_size`` sequences per forward pass."""
        return self._score(items, batch_size=batch_size, one_pass=self.one_pass)

    def _score(self, items, *, batch_size: int, one_pass: bool) -> list[list[float]]:
        from posttrainlab.prm.format import encode_solution
        from posttrainlab.prm.results import segments

        if batch_size < 1:
            raise BadInput(f"batch_size {batch_size}: must be at least 1")
        results = self.head.reads_results  # the result head also needs where each result token is summed

        def encode(question, steps):
            enc = encode_solution(self.tokenizer, self.spec, question, steps, offsets=results)
            return enc, (segments(enc, steps) if results else None)

        out: list[list[float]] = []
        units = []  # (item, ids, [(position, step)], segments or None)
        for i, item in enumerate(items):
            question, steps = _check_item(i, item)
            out.append([0.0] * len(steps))
            try:
                if one_pass and steps:
                    enc, seg = encode(question, steps)
                    units.append((i, enc.input_ids, [(p, k) for k, p in enumerate(enc.separators)], seg))
                else:
                    for k in range(len(steps)):
                        enc, seg = encode(question, steps[: k + 1])
                        units.append((i, enc.input_ids, [(enc.separators[-1], k)], seg))
            except ValueError as e:
                raise BadInput(f"solution {i}: {e}") from None
        units.sort(key=lambda u: len(u[1]), reverse=True)
        for start in range(0, len(units), batch_size):
            chunk = units[start : start + batch_size]
            probs = self._forward([u[1] for u in chunk], [u[3] for u in chunk] if results else None)
            for row, (i, _, reads, _) in enumerate(chunk):
                for position, k in reads:
                    out[i][k] = float(probs[row, position])
        return out

    def _forward(self, sequences: list[list[int]], segments: list[list[int]] | None = None):
        """P(correct) at every position of a right-padded batch, as a float32 CPU tensor ``[B, T]``."""
        import torch

        from posttrainlab.generation.prompts import right_pad, right_pad_ids
        from posttrainlab.prm.results import NO_STEP

        ids, mask = right_pad_ids(sequences, self.tokenizer.pad_token_id)
        seg = None if segments is None else right_pad(segments, NO_STEP)
        with torch.inference_mode():
            logits = self.head.logits(self.model, ids.to(self.device), mask.to(self.device), seg)
            return torch.softmax(logits.float(), dim=-1)[..., 1].cpu()


def _check_item(i: int, item) -> tuple[str, list[str]]:
    try:
        question, steps = item
    except (TypeError, ValueError):
        raise BadInput(f"solution {i}: expected a (question, steps) pair") from None
    if not isinstance(question, str) or isinstance(steps, str) or not all(isinstance(s, str) for s in steps):
        raise BadInput(f"solution {i}: expected a question string and a list of step strings")
    return question, list(steps)

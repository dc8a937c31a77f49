"""A zero-training baseline verifier: the policy's own probability of each line's result.

Every trained PRM should beat the verifier that costs nothing: the policy itself. For step k of a solution it
reads the policy's probability of the line's **result** given everything before it (the prompt the policy was
sampled from, the earlier lines, and this line up to its result):

    score_k = P_policy(result tokens of line k | prompt, line 1 .. line k-1, line k before its result)
            = exp(sum of log-softmax(logits)[next token] over those tokens)

- the result of ``a op b = c`` is ``c``; of ``Answer: N`` it is ``N``; a line of any other shape is read
  whole (the policy's probability of writing that line); the tokens read are those whose characters overlap
  the result (``prm.results``, which the trained version of this verifier, the ``result`` head, reads too);
- the sequence is the policy's own (``prm.policy_format``: the chat template over arith-v1's
  instruction + question, then the lines each followed by a newline), so no word of it is new to the model.

A policy that put its mass on ``282`` after ``94 * 3 =`` gives a sampled ``292`` a low score there. It is a
probability in [0, 1], one per step, so every PRM consumer takes it: ``posttrain eval prm --model
baseline:POLICY``, ``eval best-of-n --prm baseline:POLICY``, ``eval beam-search --prm baseline:POLICY``
(``runners.prm_eval.load_scorer``). One forward pass per solution (causal: a step's score never sees later lines),
batches right-padded and sorted by length, logits kept only at the positions read.

Written by hand: it is the policy-format encoding and one gather of log-probabilities.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from posttrainlab.data.arith.problems import INSTRUCTION
from posttrainlab.errors import BadInput
from posttrainlab.prm.results import result_span, result_tokens

#: The ``--prm`` / ``--model`` prefix that names the baseline verifier of a policy: ``baseline:runs/qs/sft``.
BASELINE = "baseline:"


def is_baseline(spec) -> bool:
    """Whether a PRM argument names the baseline verifier (``baseline:POLICY``).

    >>> is_baseline("baseline:runs/sft"), is_baseline("runs/prm")
    (True, False)
    """
    return str(spec).startswith(BASELINE)


def baseline_policy(spec) -> str:
    """The policy a ``baseline:POLICY`` argument names; ``BadInput`` when it names none.

    >>> baseline_policy("baseline:runs/sft")
    'runs/sft'
    """
    policy = str(spec)[len(BASELINE) :]
    if not policy:
        raise BadInput(f"{spec}: name the policy after {BASELINE} (e.g. {BASELINE}runs/qs/sft)")
    return policy


class PolicyVerifier:
    """``score_batch(items) -> per-step P_policy(result)`` (module docstring); the ``posttrainlab.prm.PRM`` API."""

    def __init__(self, model, tokenizer, *, instruction: str = INSTRUCTION, device=None):
        import torch

        from posttrainlab.prm.spec import PRMSpec

        self.model, self.tokenizer = model, tokenizer
        self.spec = PRMSpec(input_format="policy", instruction=instruction)  # how it reads; no_answer_step empty
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    @classmethod
    def from_pretrained(cls, path, dtype: str = "float32", device=None) -> PolicyVerifier:
        """Load the policy at ``path`` (a folder or Hub id; ``models.loading.load_causal_lm``)."""
        import torch

        from posttrainlab.models.loading import load_causal_lm

        model, tokenizer = load_causal_lm(path, dtype=dtype)
        device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
        return cls(model.to(device), tokenizer, device=device)

    def score(self, question: str, steps: Sequence[str]) -> list[float]:
        return self.score_batch([(question, steps)], batch_size=1)[0]

    def reads(self, question: str, steps: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """``(ids, tokens)``: the solution's ids and, per step, the positions of its result's tokens."""
        from posttrainlab.prm.format import encode_solution

        enc = encode_solution(self.tokenizer, self.spec, question, list(steps), offsets=True)
        return enc.input_ids, result_tokens(enc, steps)

    def score_batch(self, items: Sequence[tuple[str, Sequence[str]]], batch_size: int = 8) -> list[list[float]]:
        if batch_size < 1:
            raise BadInput(f"batch_size {batch_size}: must be at least 1")
        units = []
        for i, (question, steps) in enumerate(items):
            try:
                units.append((i, *self.reads(question, list(steps))))
            except ValueError as e:
                raise BadInput(f"solution {i}: {e}") from None
        out: list[list[float]] = [[] for _ in items]
        units.sort(key=lambda u: len(u[1]), reverse=True)
        for start in range(0, len(units), batch_size):
            chunk = units[start : start + batch_size]
            logps = self._log_probs([u[1] for u in chunk], [[t for step in u[2] for t in step] for u in chunk])
            for (i, _ids, steps), lp in zip(chunk, logps, strict=True):
                out[i] = [min(1.0, math.exp(sum(lp[t] for t in step))) for step in steps]
        return out

    def _log_probs(self, sequences: list[list[int]], wanted: list[list[int]]) -> list[dict[int, float]]:
        """``{t: log P(ids[t] | ids[:t])}`` for the wanted positions of each right-padded sequence."""
        import torch

        from posttrainlab.generation.prompts import right_pad_ids

        ids, mask = right_pad_ids(sequences, self.pad_id)
        out = []
        with torch.inference_mode():
            logits = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device)).logits
            for r, positions in enumerate(wanted):
                if not positions:
                    out.append({})
                    continue
                at = torch.tensor(positions, device=logits.device)
                lp = torch.log_softmax(logits[r, at - 1].float(), dim=-1)
                got = lp.gather(1, ids[r, positions].to(lp.device).unsqueeze(1)).squeeze(1).cpu().tolist()
                out.append(dict(zip(positions, got, strict=True)))
        return out


__all__ = ["BASELINE", "PolicyVerifier", "baseline_policy", "is_baseline", "result_span"]

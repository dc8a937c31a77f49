"""Shared-prefix sampling against encoding the prefix again for every continuation (Monte-Carlo labelling).

Both ways draw N continuations from each of the same prefixes on the same model through
``TransformersBackend``, sampling at temperature 1 with ``max_new_tokens`` new tokens:

- **shared**: ``sample_continuations`` (one prefill per prefix, its KV cache expanded to N rows);
- **shared, concatenating cache**: the same with transformers' own cache, which copies itself at every
  decode step (so the two gains, one prefill and an in-place cache, are shown apart);
- **re-encoded**: ``generate(n=N)`` on the prompt text with the prefix appended, where transformers'
  ``num_return_sequences`` expands the input N times before the prefill.

The prefixes are the prefixes of arith-v1 reference solutions (``--problems`` freshly drawn problems,
every prefix but the whole solution), after a ``--shots``-example few-shot context (default 2, ~550
byte tokens: MC labelling continues long traces; ``--shots 0`` gives the bare arith prompt). The model is
the tiny arith model at its default size (random init: speed does not depend on the weights) or
``--policy DIR``. Prefill tokens are counted at the model's forward (``count_forward_tokens``).
Prints rollouts/s and prefill tokens of each way, then the ratio last.

    .venv/bin/python bench/bench_mc_sampling.py [--n 16] [--shots 2] [--problems 4] [--threads 1] [--policy DIR]
"""

from __future__ import annotations

import argparse
import random
import time


def build_requests(shots: int, problems: int = 6):
    from posttrainlab.data.arith.problems import CATEGORIES, draw
    from posttrainlab.generation.shared_prefix import PrefixRequest, derive_seed

    rng, taken = random.Random(0), set()
    examples = [draw(CATEGORIES[i % len(CATEGORIES)], rng, taken) for i in range(shots)]
    context = "".join(f"{p.prompt}\n{p.solution}\n\n" for p in examples)
    requests = []
    for i in range(problems):
        p = draw(CATEGORIES[i % len(CATEGORIES)], rng, taken)
        prompt = [{"role": "user", "content": context + p.prompt}]
        steps = p.solution.split("\n")
        for k in range(len(steps) - 1):
            prefix = "\n".join(steps[: k + 1]) + "\n"
            requests.append(PrefixRequest(prompt, prefix, derive_seed(0, i, k)))
    return requests


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="continuations per prefix")
    parser.add_argument("--shots", type=int, default=2, help="solved examples before each problem")
    parser.add_argument("--problems", type=int, default=4, help="problems whose solution prefixes are continued")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8, help="prefixes per prefill / prompts per generate call")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1: fastest for a 3M model on a shared CPU)"
    )
    parser.add_argument("--policy", default=None, help="a model folder instead of the random tiny model")
    args = parser.parse_args(argv)

    import torch

    from posttrainlab.generation.shared_prefix import continuation_text, count_forward_tokens
    from posttrainlab.generation.transformers_backend import TransformersBackend
    from posttrainlab.models.tiny import TinyModelConfig, build_model, count_parameters

    torch.set_num_threads(args.threads)
    if args.policy:
        backend = TransformersBackend.from_pretrained(args.policy, batch_size=args.batch_size, progress=False)
    else:
        model, tokenizer = build_model(TinyModelConfig())
        backend = TransformersBackend(model, tokenizer, batch_size=args.batch_size, progress=False)
    backend.share_prefill = False  # generate(n=N) below is transformers' num_return_sequences, the baseline
    requests = build_requests(args.shots, args.problems)
    texts = [continuation_text(backend.tokenizer, r.prompt, r.prefix) for r in requests]
    sampling = dict(n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens)
    backend.sample_continuations(requests[:2], n=2, temperature=1.0, max_new_tokens=4)  # warm-up
    backend.generate(texts[:2], n=2, temperature=1.0, max_new_tokens=4)

    with count_forward_tokens(backend.model) as shared_count:
        start = time.perf_counter()
        shared = backend.sample_continuations(requests, **sampling)
        t_shared = time.perf_counter() - start
    from posttrainlab.generation.shared_prefix import sample_shared_prefix

    start = time.perf_counter()
    sample_shared_prefix(
        backend.model, backend.tokenizer, requests, eos_ids=backend.eos_ids(), batch_size=args.batch_size,
        preallocate=False, **sampling,
    )  # fmt: skip
    t_concat = time.perf_counter() - start
    with count_forward_tokens(backend.model) as again_count:
        start = time.perf_counter()
        again = backend.generate(texts, seed=0, **sampling)
        t_again = time.perf_counter() - start

    rollouts = len(requests) * args.n
    prompt_tokens = sum(len(backend.tokenizer(t)["input_ids"]) for t in texts) / len(texts)
    new_shared = sum(len(c) for o in shared for c in o) / rollouts
    new_again = sum(len(c) for o in again for c in o) / rollouts
    print(
        f"model: {count_parameters(backend.model) / 1e6:.1f}M parameters; torch threads {torch.get_num_threads()}; "
        f"{len(requests)} prefixes x N={args.n} = {rollouts} rollouts; prompt+prefix {prompt_tokens:.0f} tokens "
        f"on average; up to {args.max_new_tokens} new tokens (mean new chars: shared {new_shared:.1f}, "
        f"re-encoded {new_again:.1f})"
    )
    print(
        f"shared prefix:  {t_shared:6.2f} s  {rollouts / t_shared:7.1f} rollouts/s  "
        f"prefill tokens {shared_count.prefill_tokens:>8} ({shared_count.prefill_calls} prefill calls)"
    )
    print(f"shared, concatenating cache: {t_concat:6.2f} s  {rollouts / t_concat:7.1f} rollouts/s")
    print(
        f"re-encoded:     {t_again:6.2f} s  {rollouts / t_again:7.1f} rollouts/s  "
        f"prefill tokens {again_count.prefill_tokens:>8} ({again_count.prefill_calls} prefill calls)"
    )
    print(f"prefill tokens re-encoded / shared: {again_count.prefill_tokens / shared_count.prefill_tokens:.1f}x")
    print(f"rollouts/s shared / re-encoded: {t_again / t_shared:.2f}x")


if __name__ == "__main__":
    main()

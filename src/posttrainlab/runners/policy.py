"""``posttrain eval policy``: generate, grade and write what a post-trained model gets right on arith-v1.

``evaluate_policy(model, data, out_dir)`` generates one response per problem (greedy by default),
grades it with the arith grader, and writes ``out_dir/samples.jsonl`` (every prompt, response and
grade) and ``out_dir/metrics.json``, each atomically, metrics last (a run that fails writes nothing
over an earlier good output). ``metrics.json`` holds, as fractions in [0, 1] (``eval.policy`` computes them):

- ``accuracy`` overall and ``per_category``, ``outcomes``, ``outcome_shares`` and ``format_rate``
  (``eval.policy.policy_metrics``);
- ``pass_at_k`` when ``k > 1``: ``n_samples >= k`` further samples per problem at a temperature
  above 0, the unbiased estimator averaged over problems, overall and per category;
- ``sampled`` when ``n_samples > 1`` samples are drawn: pass@1 (the mean share of correct samples, with a t
  interval) and maj@K (majority vote, Wilson interval), overall and per category, and the samples' format rate
  (``eval.sampled``); each ``samples.jsonl`` row then holds its samples, ``n_correct``, ``maj_answer`` and
  ``maj_correct``, which ``runners.compare.sampled_comparison`` pairs with another evaluation's;
- ``trace_error`` when every problem is an arith-v1 one (``eval.trace_error``, Uesato et al. 2022): among the
  greedy responses with the right answer, the share with a wrong step by the exact program labels
  (``data.arith.steps.first_error``), with ``trace_error_count``, ``right_answers`` and a Wilson interval, overall
  and per category; with samples, ``sampled.trace_error`` pools every right-answer sample of every problem. Each
  ``samples.jsonl`` row (and each of its samples) then holds ``wrong_step``, rows with samples ``n_trace_errors``,
  which ``runners.compare.trace_comparison`` pairs with another evaluation's;
- ``preference`` when a preference split is named: the share of (chosen, rejected) pairs the policy
  ranks the right way round, overall and ``per_corruption`` (``eval.policy.preference_metrics``).
  Log-probabilities are summed over the completion tokens and the eos that ends them (TRL's DPOTrainer
  scores the same tokens), the prompt rendered with the chat template as in generation (``sequence_logprobs``);
- ``generation``: how the responses were drawn and how fast (requests/s).

torch is imported only inside the functions that run a model.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from posttrainlab.data.problems import read_records
from posttrainlab.errors import BadInput
from posttrainlab.eval.policy import Scorer, grade_rows, policy_metrics, preference_margins, preference_metrics
from posttrainlab.eval.trace_error import mark_rows, sampled_trace_metrics, trace_metrics
from posttrainlab.generation.prompts import as_messages
from posttrainlab.grading import get_grader
from posttrainlab.provenance import provenance
from posttrainlab.run_layout import METRICS, SAMPLES
from posttrainlab.runners.settings import PolicyEvalSettings


def sequence_logprobs(
    model, tokenizer, prompts: list, completions: list[str], batch_size: int = 16, add_eos: bool = True
) -> list[float]:
    """Summed log-probability of each completion given its prompt (completion tokens only).

    The prompt is rendered as for generation (chat template, assistant turn opened); the completion
    is tokenized on its own and appended as token ids, so the prompt/completion boundary is exact;
    ``add_eos`` appends the tokenizer's eos, which ends every completion the policy was trained on.
    Batches are left-padded with position ids from the attention mask (so a padded row scores what
    it would alone), sorted by length, and only the last ``max completion + 1`` positions go through
    the LM head (``logits_to_keep``), which keeps memory small for large vocabularies.
    """
    import inspect

    import torch

    from posttrainlab.generation.transformers_backend import encode_prompt, left_pad, length_sorted_batches

    eos = [tokenizer.eos_token_id] if add_eos and tokenizer.eos_token_id is not None else []
    rows = []
    for prompt, completion in zip(prompts, completions, strict=True):
        prompt_ids = encode_prompt(tokenizer, prompt)
        if not prompt_ids:
            raise BadInput(f"empty prompt for completion {completion[:40]!r}: nothing to condition on")
        rows.append((prompt_ids, list(tokenizer(completion, add_special_tokens=False)["input_ids"]) + eos))
    keeps_logits = "logits_to_keep" in inspect.signature(model.forward).parameters
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = [0.0] * len(rows)
    with torch.inference_mode():
        for batch in length_sorted_batches([len(p) + len(c) for p, c in rows], batch_size):
            ids, mask = left_pad([rows[i][0] + rows[i][1] for i in batch], pad_id)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            keep = max(len(rows[i][1]) for i in batch) + 1
            kwargs = {"logits_to_keep": keep} if keeps_logits else {}
            device = model.device
            logits = model(
                input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device), **kwargs
            ).logits[:, -keep:]
            for j, i in enumerate(batch):
                n_comp = len(rows[i][1])
                if n_comp == 0:
                    continue
                # The token at sequence position t is predicted by the logits at t - 1.
                row_logits = logits[j, keep - n_comp - 1 : keep - 1].float()
                targets = ids[j, -n_comp:].to(row_logits.device)
                out[i] = row_logits.log_softmax(-1).gather(-1, targets[:, None]).sum().item()
    return out


def _resolve_split(data_spec: str, split: str | None) -> tuple[Path, str]:
    """The verified file of the evaluated split and its name (``DIR:SPLIT``, ``--split``, else ``test``)."""
    from posttrainlab.data.loading import split_file

    path = split_file(data_spec, split, default_split="test")
    if split is not None and path.stem != split:
        raise BadInput(f"{data_spec}: is the {path.stem!r} split, but split {split!r} was asked for")
    return path, path.stem


def _preference_source(data_spec: str, split_name: str) -> str:
    """The dataset (folder or Hub id) that ``data_spec`` belongs to, where the preference split lives."""
    from posttrainlab.data.loading import dataset_folder

    folder = dataset_folder(data_spec)
    if folder is not None:
        return folder
    raise BadInput(
        f"{data_spec}: a lone file holds no {split_name!r} split; pass the dataset folder or --preference-split none"
    )


def evaluate_policy(
    model_path: str | os.PathLike, data_spec: str, out_dir: str | os.PathLike,
    settings: PolicyEvalSettings | None = None, *, ref_model: str | os.PathLike | None = None, progress: bool = True,
    backend=None, scorer: Scorer | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Evaluate a policy and write ``out_dir/metrics.json`` and ``out_dir/samples.jsonl`` (module doc).

    ``settings`` (``runners.settings.PolicyEvalSettings``, its defaults when ``None``): ``split`` defaults to the one
    named in ``data_spec`` (``DIR:SPLIT``), else ``test``; ``samples`` (default ``k``) > 1 draws that many samples per
    problem at ``sample_temperature`` (default ``temperature``, 1.0 when that is 0): pass@1 and maj@K (``sampled``),
    and pass@k when ``k > 1``. ``ref_model``: preference accuracy by DPO's implicit reward against it. ``backend``
    (a ``SamplingBackend``) and ``scorer`` (for preference pairs) replace the model loaded from ``model_path``.
    Returns the metrics.
    """
    opts = PolicyEvalSettings() if settings is None else settings
    opts.check()
    k, n_samples, temperature, top_p, batch_size = opts.k, opts.n_samples, opts.temperature, opts.top_p, opts.batch_size
    from posttrainlab.data.atomic import check_writable

    check_writable(out_dir)  # a file in the path, an unwritable place: refused before the generation, not after
    from posttrainlab.generation.transformers_backend import check_sampling

    check_sampling(1, temperature, top_p, opts.max_new_tokens)
    grade = get_grader(opts.grader)
    path, split_name = _resolve_split(data_spec, opts.split)
    records = read_records(path, required=("prompt", "answer"), limit=opts.limit, what="records to evaluate")
    pairs = None
    if opts.preference_split is not None:
        from posttrainlab.data.loading import split_file

        pref_path = split_file(_preference_source(data_spec, opts.preference_split), opts.preference_split)
        pairs = read_records(
            pref_path, required=("prompt", "chosen", "rejected"), limit=opts.limit, what="records to evaluate"
        )

    if backend is None:
        from posttrainlab.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend.from_pretrained(
            model_path,
            batch_size=batch_size,
            progress=progress,
            trust_remote_code=opts.trust_remote_code,
            dtype=opts.dtype,
        )
    prompts = [as_messages(r["prompt"]) for r in records]
    sampling = {"top_p": top_p, "max_new_tokens": opts.max_new_tokens, "seed": opts.seed}
    start = time.perf_counter()
    from posttrainlab.progress import task_label

    with task_label(f"answering {split_name}"):
        responses = [c[0] for c in backend.generate(prompts, n=1, temperature=temperature, **sampling)]
    seconds = time.perf_counter() - start
    sampled = None
    sample_temperature = opts.sample_temperature
    if n_samples > 1:
        sample_temperature = sample_temperature or (temperature if temperature > 0 else 1.0)
        start = time.perf_counter()
        with task_label(f"sampling {split_name} (n={n_samples})"):
            sampled = backend.generate(prompts, n=n_samples, temperature=sample_temperature, **sampling)
        sample_seconds = time.perf_counter() - start
    rows = grade_rows(records, responses, grade, sampled)
    traced = mark_rows(rows)  # wrong_step per response and sample when every problem is arith-v1 (eval.trace_error)
    if sampled is not None:
        from posttrainlab.eval.sampled import add_votes

        add_votes(rows)  # n_correct, maj_answer, maj_correct per problem (eval.sampled)

    metrics: dict[str, Any] = {"model": str(model_path), "data": str(data_spec), "split": split_name, "n": len(rows)}
    metrics.update(policy_metrics(rows, k))
    categories = list(metrics["per_category"])
    if traced:
        metrics["trace_error"] = trace_metrics(rows, categories)
    if k > 1:
        metrics["pass_at_k"].update(temperature=sample_temperature, top_p=top_p, seconds=sample_seconds)
    if sampled is not None:
        from posttrainlab.eval.sampled import sampled_metrics

        metrics["sampled"] = {**sampled_metrics(rows, categories), "temperature": sample_temperature, "top_p": top_p,
                              "seconds": sample_seconds}  # fmt: skip
        if traced:
            metrics["sampled"]["trace_error"] = sampled_trace_metrics(rows, categories)
    if pairs is not None:
        metrics["preference"] = _evaluate_preferences(pairs, backend, scorer, ref_model, opts)
    metrics["generation"] = {
        "backend": getattr(backend, "name", type(backend).__name__),
        "greedy": temperature == 0,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": opts.max_new_tokens,
        "batch_size": batch_size,
        "seed": opts.seed,
        "seconds": seconds,
        "requests_per_s": len(rows) / seconds if seconds > 0 else None,
    }
    metrics["provenance"] = provenance(seeds={"generation": opts.seed})
    write_outputs(out_dir, metrics, rows)
    return metrics


def _evaluate_preferences(pairs, backend, scorer, ref_model, opts: PolicyEvalSettings) -> dict[str, Any]:
    from functools import partial

    if scorer is None:
        if not (hasattr(backend, "model") and hasattr(backend, "tokenizer")):
            raise BadInput("preference accuracy needs a transformers model to score with; pass --preference-split none")
        scorer = partial(sequence_logprobs, backend.model, backend.tokenizer, batch_size=opts.batch_size)
    ref_scorer = None
    if ref_model is not None:
        from posttrainlab.models.loading import load_causal_lm

        ref, ref_tokenizer = load_causal_lm(ref_model, trust_remote_code=opts.trust_remote_code, dtype=opts.dtype)
        ref_scorer = partial(sequence_logprobs, ref, ref_tokenizer, batch_size=opts.batch_size)
    margins = preference_margins(pairs, scorer, ref_scorer, opts.beta)
    method = "implicit_reward" if ref_scorer is not None else "logprob_margin"
    result = {"split": opts.preference_split, **preference_metrics(pairs, margins, method)}
    if ref_model is not None:
        result.update(ref_model=str(ref_model), beta=opts.beta)
    return result


def write_outputs(out_dir: str | os.PathLike, metrics: dict, rows: list[dict]) -> None:
    """``samples.jsonl`` then ``metrics.json``, each written atomically (metrics last marks a finished run)."""
    from posttrainlab.data.jsonl import write_json, write_jsonl

    out = Path(out_dir)
    write_jsonl(out / SAMPLES, rows)
    write_json(out / METRICS, metrics, ensure_ascii=False)

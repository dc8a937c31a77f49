"""Policy evaluation: what a post-trained model gets right on arith-v1, per category, with intervals.

``evaluate_policy(model, data, out_dir)`` generates one response per problem (greedy by default),
grades it with the arith grader, and writes ``out_dir/samples.jsonl`` (every prompt, response and
grade) and ``out_dir/metrics.json``, each atomically, metrics last (a run that fails writes nothing
over an earlier good output). ``metrics.json`` holds, as fractions in [0, 1]:

- ``accuracy`` overall and ``per_category`` (arith-v1's category order), each
  ``{"value", "ci95", "correct", "n"}`` with a 95% Wilson interval (``eval.intervals``);
- ``outcomes`` (counts of correct / wrong_answer / missing_answer / malformed) and ``outcome_shares``;
- ``format_rate``: the share of responses whose answer is in the required form, right or wrong
  (``Grade.well_formatted``);
- ``pass_at_k`` when ``k > 1``: ``n_samples >= k`` further samples per problem at a temperature
  above 0, the unbiased estimator averaged over problems, overall and per category;
- ``sampled`` when ``n_samples > 1`` samples are drawn: pass@1 (the mean share of correct samples, with a t
  interval) and maj@K (majority vote, Wilson interval), overall and per category, and the samples' format rate
  (``eval.sampled``); each ``samples.jsonl`` row then holds its samples, ``n_correct``, ``maj_answer`` and
  ``maj_correct``, which ``eval.sampled_compare`` pairs with another evaluation's;
- ``preference`` when a preference split is named: the share of (chosen, rejected) pairs the policy
  ranks the right way round, overall and ``per_corruption``. With a reference model it is DPO's
  implicit reward, ``beta * [(log pi(c) - log pi_ref(c)) - (log pi(r) - log pi_ref(r))] > 0``
  (Rafailov et al. 2023, eq. 5); without one, the raw margin ``log pi(c) - log pi(r) > 0``. A tie
  (margin exactly 0) counts as a miss. Log-probabilities are summed over the completion tokens and
  the eos that ends them (TRL's DPOTrainer scores the same tokens), the prompt rendered with the
  chat template as in generation (``sequence_logprobs``);
- ``generation``: how the responses were drawn and how fast (requests/s).

The metric functions (``grade_rows``, ``policy_metrics``, ``preference_margins``,
``preference_metrics``) are pure and take any backend's output, so tests check them with fixed
responses and a stub scorer; torch is imported only inside the functions that run a model.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from posttrainlab.data.arith.corrupt import CORRUPTIONS
from posttrainlab.data.arith.problems import CATEGORIES
from posttrainlab.data.problems import read_records
from posttrainlab.errors import BadInput
from posttrainlab.eval.intervals import pass_at_k, proportion
from posttrainlab.generation.prompts import as_messages
from posttrainlab.grading import OUTCOMES, Grade, get_grader
from posttrainlab.provenance import provenance

#: ``score(prompts, completions) -> summed log-probabilities``, one per pair of arguments.
Scorer = Callable[[list, list[str]], list[float]]

#: The outcome types always reported (arith's); others (the math grader's ``timeout``) when they occur.
REPORTED_OUTCOMES = OUTCOMES[:4]
UNCATEGORISED = "uncategorised"


def ordered_groups(values: Sequence[str], known: Sequence[str]) -> list[str]:
    """The distinct ``values``: those in ``known`` in that order, then the rest as first seen.

    >>> ordered_groups(["word_problem", "x", "addition", "x"], ("addition", "subtraction", "word_problem"))
    ['addition', 'word_problem', 'x']
    """
    seen = list(dict.fromkeys(values))
    return [v for v in known if v in seen] + [v for v in seen if v not in known]


def _grade_fields(grade: Grade) -> dict[str, Any]:
    return {"correct": grade.correct, "outcome": grade.outcome, "parsed": grade.parsed}


def grade_rows(records: list[dict], responses: list[str], grader, sampled: list[list[str]] | None = None) -> list[dict]:
    """One samples.jsonl row per problem: id, category, prompt, answer, response, grade (and samples)."""
    rows = []
    for i, (record, response) in enumerate(zip(records, responses, strict=True)):
        row = {
            "id": record.get("id", str(i)),
            "category": record.get("category", UNCATEGORISED),
            "prompt": record["prompt"],
            "answer": record["answer"],
            "response": response,
            **_grade_fields(grader.grade(response, record["answer"])),
        }
        if sampled is not None:
            grades = [grader.grade(s, record["answer"]) for s in sampled[i]]
            row["samples"] = [{"response": s, **_grade_fields(g)} for s, g in zip(sampled[i], grades, strict=True)]
            row["n_correct"] = sum(g.correct for g in grades)
        rows.append(row)
    return rows


def policy_metrics(rows: list[dict], k: int = 1) -> dict[str, Any]:
    """Accuracy (overall, per category), outcome counts and shares, format rate, pass@k (``k > 1``)."""
    n = len(rows)
    categories = ordered_groups([r["category"] for r in rows], CATEGORIES)
    by_cat = {c: [r for r in rows if r["category"] == c] for c in categories}
    counts = {o: 0 for o in REPORTED_OUTCOMES}
    for r in rows:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    formatted = sum(Grade(r["correct"], r["outcome"], r["parsed"]).well_formatted for r in rows)
    metrics: dict[str, Any] = {
        "accuracy": proportion(sum(r["correct"] for r in rows), n),
        "per_category": {c: proportion(sum(r["correct"] for r in rs), len(rs)) for c, rs in by_cat.items()},
        "outcomes": counts,
        "outcome_shares": {o: c / n if n else 0.0 for o, c in counts.items()},
        "format_rate": formatted / n if n else 0.0,
    }
    if k > 1:

        def mean_pass(rs: list[dict]) -> float:
            return sum(pass_at_k(len(r["samples"]), r["n_correct"], k) for r in rs) / len(rs) if rs else 0.0

        metrics["pass_at_k"] = {
            "k": k,
            "n_samples": len(rows[0]["samples"]) if rows else k,
            "value": mean_pass(rows),
            "per_category": {c: mean_pass(rs) for c, rs in by_cat.items()},
        }
    return metrics


def preference_margins(
    pairs: list[dict], score: Scorer, ref_score: Scorer | None = None, beta: float = 0.1
) -> list[float]:
    """Per pair: ``log pi(c) - log pi(r)``, or with a reference DPO's implicit-reward margin (module doc)."""
    prompts = [as_messages(p["prompt"]) for p in pairs] * 2
    completions = [p["chosen"] for p in pairs] + [p["rejected"] for p in pairs]
    m = len(pairs)
    policy = score(prompts, completions)
    margins = [policy[i] - policy[m + i] for i in range(m)]
    if ref_score is None:
        return margins
    ref = ref_score(prompts, completions)
    return [beta * (margins[i] - (ref[i] - ref[m + i])) for i in range(m)]


def preference_metrics(pairs: list[dict], margins: list[float], method: str) -> dict[str, Any]:
    """Share of pairs with margin > 0, overall and per corruption type (arith-v1's order)."""
    kinds = [p.get("corruption", "unknown") for p in pairs]
    wins = [m > 0 for m in margins]

    def share(selected: list[int]) -> dict:
        return proportion(sum(wins[i] for i in selected), len(selected))

    return {
        "method": method,
        "accuracy": share(list(range(len(pairs)))),
        "per_corruption": {
            kind: share([i for i, k in enumerate(kinds) if k == kind]) for kind in ordered_groups(kinds, CORRUPTIONS)
        },
        "mean_margin": sum(margins) / len(margins) if margins else 0.0,
    }


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
    model_path: str | os.PathLike,
    data_spec: str,
    out_dir: str | os.PathLike,
    *,
    split: str | None = None,
    limit: int | None = None,
    batch_size: int = 32,
    max_new_tokens: int = 64,
    k: int = 1,
    n_samples: int | None = None,
    temperature: float = 0.0,
    sample_temperature: float | None = None,
    top_p: float = 1.0,
    seed: int = 0,
    preference_split: str | None = "preference_test",
    ref_model: str | os.PathLike | None = None,
    beta: float = 0.1,
    grader: str = "arith",
    trust_remote_code: bool = False,
    dtype: str = "float32",
    progress: bool = True,
    backend=None,
    scorer: Scorer | None = None,
) -> dict[str, Any]:
    """Evaluate a policy and write ``out_dir/metrics.json`` and ``out_dir/samples.jsonl`` (module doc).

    ``split`` defaults to the one named in ``data_spec`` (``DIR:SPLIT``), else ``test``. ``n_samples`` (default
    ``k``) > 1 draws that many samples per problem at ``sample_temperature`` (default ``temperature``, 1.0 when that
    is 0): pass@1 and maj@K (``sampled``), and pass@k when ``k > 1``. ``backend`` (a ``SamplingBackend``) and
    ``scorer`` (for preference pairs) replace the model loaded from ``model_path``. Returns the metrics.
    """
    n_samples = k if n_samples is None else n_samples
    if limit is not None and limit < 1:
        raise BadInput(f"limit={limit}: must be at least 1")
    if k < 1 or n_samples < k:
        raise BadInput(f"k={k}, n_samples={n_samples}: need 1 <= k <= n_samples")
    if sample_temperature is not None and not sample_temperature > 0:
        raise BadInput(f"sample_temperature={sample_temperature}: must be > 0 (k samples, not k equal answers)")
    if beta <= 0:
        raise BadInput(f"beta={beta}: must be > 0")
    from posttrainlab.data.atomic import check_writable

    check_writable(out_dir)  # a file in the path, an unwritable place: refused before the generation, not after
    from posttrainlab.generation.transformers_backend import check_sampling

    check_sampling(1, temperature, top_p, max_new_tokens)
    grade = get_grader(grader)
    path, split_name = _resolve_split(data_spec, split)
    records = read_records(path, required=("prompt", "answer"), limit=limit, what="records to evaluate")
    pairs = None
    if preference_split is not None:
        from posttrainlab.data.loading import split_file

        pref_path = split_file(_preference_source(data_spec, preference_split), preference_split)
        pairs = read_records(
            pref_path, required=("prompt", "chosen", "rejected"), limit=limit, what="records to evaluate"
        )

    if backend is None:
        from posttrainlab.generation.transformers_backend import TransformersBackend

        backend = TransformersBackend.from_pretrained(
            model_path, batch_size=batch_size, progress=progress, trust_remote_code=trust_remote_code, dtype=dtype
        )
    prompts = [as_messages(r["prompt"]) for r in records]
    sampling = {"top_p": top_p, "max_new_tokens": max_new_tokens, "seed": seed}
    start = time.perf_counter()
    from posttrainlab.progress import task_label

    with task_label(f"answering {split_name}"):
        responses = [c[0] for c in backend.generate(prompts, n=1, temperature=temperature, **sampling)]
    seconds = time.perf_counter() - start
    sampled = None
    if n_samples > 1:
        sample_temperature = sample_temperature or (temperature if temperature > 0 else 1.0)
        start = time.perf_counter()
        with task_label(f"sampling {split_name} (n={n_samples})"):
            sampled = backend.generate(prompts, n=n_samples, temperature=sample_temperature, **sampling)
        sample_seconds = time.perf_counter() - start
    rows = grade_rows(records, responses, grade, sampled)
    if sampled is not None:
        from posttrainlab.eval.sampled import add_votes

        add_votes(rows)  # n_correct, maj_answer, maj_correct per problem (eval.sampled)

    metrics: dict[str, Any] = {"model": str(model_path), "data": str(data_spec), "split": split_name, "n": len(rows)}
    metrics.update(policy_metrics(rows, k))
    if k > 1:
        metrics["pass_at_k"].update(temperature=sample_temperature, top_p=top_p, seconds=sample_seconds)
    if sampled is not None:
        from posttrainlab.eval.sampled import sampled_metrics

        categories = list(metrics["per_category"])
        metrics["sampled"] = {**sampled_metrics(rows, categories), "temperature": sample_temperature, "top_p": top_p,
                              "seconds": sample_seconds}  # fmt: skip
    if pairs is not None:
        metrics["preference"] = _evaluate_preferences(
            pairs, backend, scorer, ref_model, beta, batch_size, trust_remote_code, dtype, split_name=preference_split
        )
    metrics["generation"] = {
        "backend": getattr(backend, "name", type(backend).__name__),
        "greedy": temperature == 0,
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "batch_size": batch_size,
        "seed": seed,
        "seconds": seconds,
        "requests_per_s": len(rows) / seconds if seconds > 0 else None,
    }
    metrics["provenance"] = provenance(seeds={"generation": seed})
    write_outputs(out_dir, metrics, rows)
    return metrics


def _evaluate_preferences(pairs, backend, scorer, ref_model, beta, batch_size, trust_remote_code, dtype, split_name):
    from functools import partial

    if scorer is None:
        if not (hasattr(backend, "model") and hasattr(backend, "tokenizer")):
            raise BadInput("preference accuracy needs a transformers model to score with; pass --preference-split none")
        scorer = partial(sequence_logprobs, backend.model, backend.tokenizer, batch_size=batch_size)
    ref_scorer = None
    if ref_model is not None:
        from posttrainlab.models.loading import load_causal_lm

        ref, ref_tokenizer = load_causal_lm(ref_model, trust_remote_code=trust_remote_code, dtype=dtype)
        ref_scorer = partial(sequence_logprobs, ref, ref_tokenizer, batch_size=batch_size)
    margins = preference_margins(pairs, scorer, ref_scorer, beta)
    method = "implicit_reward" if ref_scorer is not None else "logprob_margin"
    result = {"split": split_name, **preference_metrics(pairs, margins, method)}
    if ref_model is not None:
        result.update(ref_model=str(ref_model), beta=beta)
    return result


def write_outputs(out_dir: str | os.PathLike, metrics: dict, rows: list[dict]) -> None:
    """``samples.jsonl`` then ``metrics.json``, each written atomically (metrics last marks a finished run)."""
    from posttrainlab.data.atomic import write_text
    from posttrainlab.data.jsonl import write_jsonl

    out = Path(out_dir)
    write_jsonl(out / "samples.jsonl", rows)
    write_text(out / "metrics.json", json.dumps(metrics, indent=2, ensure_ascii=False) + "\n")

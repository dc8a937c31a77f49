"""The policy sampler, the judge and the run options of one ``posttrain label mc`` run, built from its settings.

The CLI builds them in its own process; with ``--ray R`` every replica (``label.mc.ray_runner``) builds them
again in its own process from the same ``MCRunConfig``, so both label with the same backend, dtype and judge,
and both write the same work identity (``run_info``: the policy and the backend), so a run started one way
resumes the other way. Written by hand: which settings go to which constructor is ours.
"""

from __future__ import annotations

from typing import Any

from posttrainlab.label.mc.config import MCRunConfig
from posttrainlab.label.mc.run import RunOptions

#: problems sharing a backend call when ``problems_per_call`` is not set: 1 for transformers (batch composition,
#: and with it float rounding, fixed per problem), 8 otherwise (seeds are per request anyway)
DEFAULT_PROBLEMS_PER_CALL = {"transformers": 1}


def make_sampler(cfg: MCRunConfig):
    """The policy's backend (``generation.factory.make_backend``) with this run's settings."""
    from posttrainlab.generation.factory import make_backend

    extra: dict[str, Any] = {}
    if cfg.backend == "transformers":
        extra = {"progress": False, "trust_remote_code": cfg.trust_remote_code, "dtype": cfg.dtype}
    elif cfg.backend == "vllm":
        extra = {"trust_remote_code": cfg.trust_remote_code, "dtype": "auto" if cfg.dtype == "float32" else cfg.dtype}
    return make_backend(
        cfg.policy, backend=cfg.backend, base_url=cfg.base_url, api_key=cfg.api_key, batch_size=cfg.batch_size, **extra
    )


def make_relabeler(cfg: MCRunConfig):
    """The LLM-judge relabel pass (``label.mc.judge.Relabeler``), or None without ``--judge-model``."""
    if cfg.judge_model is None:
        return None
    from posttrainlab.generation.factory import make_backend
    from posttrainlab.label.mc.judge import Relabeler

    judge = make_backend(
        cfg.judge_model, backend="openai", base_url=cfg.judge_url, api_key=cfg.api_key, batch_size=cfg.batch_size
    )
    return Relabeler(judge, mode=cfg.judge_relabel, seed=cfg.seed)


def run_options(cfg: MCRunConfig, *, problems_per_call: int | None = None) -> RunOptions:
    """The ``RunOptions`` of this run (``problems_per_call``: the default when the settings leave it unset)."""
    from posttrainlab.label.mc.work import parse_shard

    default = problems_per_call or DEFAULT_PROBLEMS_PER_CALL.get(cfg.backend, 8)
    return RunOptions(
        shard=parse_shard(cfg.shard),
        problems_per_call=cfg.problems_per_call or default,
        keep_continuations=cfg.keep_continuations,
        run_info={"policy": cfg.policy, "backend": cfg.backend},
    )


__all__ = ["DEFAULT_PROBLEMS_PER_CALL", "make_relabeler", "make_sampler", "run_options"]

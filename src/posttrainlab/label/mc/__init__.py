"""Monte-Carlo value labelling (Polaris MC, seed 003): V(prefix) = #correct / #continuations from that prefix.

``posttrain label mc --policy DIR --data PATH --n N --out DIR`` (docs/mc-labelling.md). Written by hand:
the pipeline is the card's (branch set -> N shared-prefix continuations -> grade (+ judge relabel) ->
V per prefix -> rows), with exact conventions that no library fixes for us. One file per job, each
docstring stating its conventions:

- ``config``: the settings (``MCConfig`` decides the labels, ``OutputConfig`` shapes the files,
  ``MCRunConfig`` is every setting of the CLI run, the keys of its YAML and ``key=value``);
- ``problems``: the problems and base traces of ``--data`` (``MCProblem``, ``load_problems``);
- ``steps``: steps, prefixes and their exact arith-v1 labels;
- ``search``: the bisection of ``--search binary`` (pure, no model);
- ``rollouts``: continuations, grades and the judge's verdicts per prefix, into one work record per problem;
- ``rows``: the card's rows (the schema is ``data.formats.mc_value``), the held-out split, filters, value table;
- ``work``: the resumable work folder and shards;
- ``run``: the driver (``run_mc``, its ``RunOptions``) and the outputs (``finalize``);
- ``judge`` (LLM-judge relabel pass), ``agreement`` (MC against exact labels), ``scripted`` (a policy
  with known error rates for tests and benchmarks), ``policy`` (the run's backend and judge from its settings),
  ``ray_runner`` (``--ray R``: the problems labelled on R Ray replicas; ``--backend vllm --ray R`` goes through
  ``generation.ray_llm``, one ray.data.llm row per continuation): imported by name, not re-exported here.
"""

from __future__ import annotations

from posttrainlab.label.mc.config import SEARCHES, MCConfig, MCRunConfig, OutputConfig
from posttrainlab.label.mc.problems import MCProblem, load_problems
from posttrainlab.label.mc.rollouts import Context, label_problems
from posttrainlab.label.mc.rows import (
    LABEL,
    PROMPT_SHA256,
    PROMPT_TEMPLATE,
    PROMPT_VERSION,
    keep_band,
    mid_difficulty,
    row_messages,
    rows_of,
    validation_ids,
    value_rows,
    value_table,
)
from posttrainlab.label.mc.run import RunOptions, finalize, run_mc
from posttrainlab.label.mc.search import FirstZeroSearch, simulate_binary
from posttrainlab.label.mc.steps import exact_labels, prefix_text, split_trace
from posttrainlab.label.mc.work import WORK, WorkDir, parse_shard, read_work

__all__ = [
    "LABEL",
    "PROMPT_SHA256",
    "PROMPT_TEMPLATE",
    "PROMPT_VERSION",
    "SEARCHES",
    "WORK",
    "Context",
    "FirstZeroSearch",
    "MCConfig",
    "MCRunConfig",
    "OutputConfig",
    "MCProblem",
    "RunOptions",
    "WorkDir",
    "exact_labels",
    "finalize",
    "keep_band",
    "label_problems",
    "load_problems",
    "mid_difficulty",
    "parse_shard",
    "prefix_text",
    "read_work",
    "row_messages",
    "rows_of",
    "run_mc",
    "simulate_binary",
    "split_trace",
    "validation_ids",
    "value_rows",
    "value_table",
]

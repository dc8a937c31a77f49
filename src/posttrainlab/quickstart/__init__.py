"""``posttrain quickstart``: the main job on the embedded default, one command, offline, 2 CPU cores.

prepare arith-v1 → pretrain the tiny base (or reuse the cached one) → SFT → eval (greedy, pass@1, maj@8) → the
``methods`` listed, each from the SFT checkpoint and evaluated the same way (none by default; RFT beside its
more-training control sft-continued, DPO, GRPO...) → process supervision (arith-prm sampled from the SFT policy
and labelled exactly → a step PRM → PRM eval on held-out solutions → best-of-N and PRM-guided beam search on the
test problems; with ``process.orm`` an ORM beside it) → report, with every method paired against SFT and every
selector against majority voting. A stage is reused only when its settings and what it made are unchanged; every
training stage resumes from its last checkpoint, so a killed quickstart started again carries on where it stopped.

Presets (``--preset``) are YAML files in ``configs/quickstart/`` over ``QuickstartConfig``'s defaults, which are
the main job (``default``); ``scarce`` gives SFT 1,000 solutions and RFT 1,500 more prompts; ``smoke`` is a small
base and a few steps of each stage, to check the whole pipeline in minutes; ``smollm2`` runs the stages on a real
pretrained model, SmolLM2-135M-Instruct, imported offline (``posttrain model import``), with LoRA.
``--preset FILE.yaml`` reads a preset of the user's. Any stage setting can be changed with ``key=value``
overrides (``sft.optim.epochs=1``); ``--print-config`` shows the result (``resolved``).

The package: ``config`` (``QuickstartConfig``, presets, ``place``), ``plan`` (the stage table ``STAGES``),
``record`` (``OUT/stages.json`` and the check before anything runs), ``stage_log`` (``StageLog``: console lines,
``quickstart.log``, ``run.json``), ``run`` (``run_quickstart``). The run folder's paths: ``run_layout.RunLayout``.
"""

from posttrainlab.quickstart.config import (
    PRESET_DIR,
    BeamStage,
    EvalSettings,
    ProcessSettings,
    QuickstartConfig,
    check_config,
    method_recipe,
    place,
    preset_names,
    quickstart_config,
    resolved,
    seed_name,
)
from posttrainlab.quickstart.plan import STAGES, Stage, planned_stages
from posttrainlab.quickstart.run import run_quickstart
from posttrainlab.quickstart.stage_log import StageLog
from posttrainlab.run_layout import STAGE_LOG, RunLayout

__all__ = [
    "PRESET_DIR",
    "STAGES",
    "STAGE_LOG",
    "BeamStage",
    "EvalSettings",
    "ProcessSettings",
    "QuickstartConfig",
    "RunLayout",
    "Stage",
    "StageLog",
    "check_config",
    "method_recipe",
    "place",
    "planned_stages",
    "preset_names",
    "quickstart_config",
    "resolved",
    "run_quickstart",
    "seed_name",
]

"""One folder of every kind the lab writes, each by its own writer, on a scripted policy (no model, no network).

``folders`` (session): ``{kind: folder}`` for arith-v1 (``data prepare``), arith-prm (``label.arith_prm.build``),
generations (``run_generate``), annotations (``run_annotate`` with the arith program judge in process), sharp
(``build_sharp`` of those annotations), mc-values (``run_mc`` with a value band) and preference-pairs
(``policy_pairs``). The policy folder holds a config and fake weights, so its SHA-256 can be checked.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from posttrainlab.label.mc.scripted import ScriptedArithPolicy
from posttrainlab.runners.judge_client import Completion
from posttrainlab.serve.program_judge import ArithProgramJudge


class JudgeClient:
    """The ChatClient role over the in-process arith program judge."""

    def __init__(self):
        self.judge = ArithProgramJudge()

    def __call__(self, messages, *, temperature: float, max_tokens: int) -> Completion:
        return Completion(self.judge.answer(messages), "stop")


def fake_policy(folder: Path) -> Path:
    """A folder with a model's files (never loaded: the writers get the scripted backend)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "fake"}\n')
    (folder / "model.safetensors").write_bytes(b"fake weights")
    (folder / "train_summary.json").write_text("{}\n")  # not part of the model's hash
    return folder


@pytest.fixture(scope="session")
def folders(arith_dir, tmp_path_factory) -> dict[str, Path]:
    from posttrainlab.data.cards.kinds import upstream_provenance
    from posttrainlab.label.annotate import AnnotateConfig, run_annotate
    from posttrainlab.label.arith_prm import ArithPRMBuild, build
    from posttrainlab.label.generate import GenerateConfig, run_generate
    from posttrainlab.label.mc import RunOptions, load_problems, run_mc
    from posttrainlab.label.mc.config import MCConfig, OutputConfig
    from posttrainlab.label.policy_pairs import policy_pairs
    from posttrainlab.label.sharp_build import build_sharp
    from posttrainlab.train.recipes import PreferenceConfig

    root = tmp_path_factory.mktemp("cards")
    policy = fake_policy(root / "policy")
    out = {"arith-v1": arith_dir}

    out["arith-prm"] = root / "arith-prm"
    build(
        policy,
        arith_dir,
        out["arith-prm"],
        ArithPRMBuild(k=2, limit=3, seed=1),
        backend=ScriptedArithPolicy(),
        progress=False,
    )

    out["generations"] = root / "gen"
    gen = GenerateConfig(model=str(policy), data=f"{arith_dir}:dev", out=out["generations"], k=2, limit=8, seed=2)
    run_generate(gen, ScriptedArithPolicy(p_error=0.4))

    out["annotations"] = root / "ann"
    ann = AnnotateConfig(data=str(out["generations"]), out=out["annotations"], model_name="arith-judge", num_threads=1)
    run = run_annotate(ann, JudgeClient())
    out["sharp"] = out["annotations"] / "sharp"
    build_sharp(run.records, out["sharp"], test_share=0.25, seed=0, provenance=upstream_provenance(out["annotations"]))

    out["mc-values"] = root / "mc"
    problems = load_problems(str(arith_dir), split="validation", limit=10)
    run_mc(
        problems,
        ScriptedArithPolicy(p_error=0.3),
        out["mc-values"],
        config=MCConfig(n=4, seed=5),
        output=OutputConfig(val_problems=2, keep_band=(0.1, 0.9)),
        run=RunOptions(run_info={"policy": str(policy), "backend": "scripted"}),
        progress=False,
    )

    from posttrainlab.data.loading import load_split

    records = load_split(str(arith_dir), "preference_train", limit=12)
    dpo = root / "dpo"
    dataset = SimpleNamespace(path=str(arith_dir), split="preference_train", limit=12)
    cfg = PreferenceConfig(source="policy", k=4, seed=3, chosen_fallback="reference")
    policy_pairs(records, cfg, str(policy), dpo, dataset, backend=ScriptedArithPolicy(p_error=0.4))
    out["preference-pairs"] = dpo / "pairs"
    out["policy"] = policy
    return out

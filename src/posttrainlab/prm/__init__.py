"""Process reward models in one place: how a PRM reads a solution, its heads, loading, training examples and
losses, and the scoring API.

    from posttrainlab.prm import PRM
    prm = PRM.from_pretrained("runs/prm-step")            # or a Qwen2.5-Math-PRM folder
    prm.score("What is 2 + 3?", ["2 + 3 = 5.", "Answer: 5"])   # -> [P(step 1 correct), P(step 2 correct)]

- ``spec``: ``PRMSpec``, how a PRM reads a solution (``prm_config.json``), and the list of heads; no torch;
- ``format`` (and ``policy_format``): the one input format, a solution as the token sequence training and
  scoring read;
- ``heads``: the token-classification and verdict heads, Qwen2.5-Math-PRM's model class;
- ``loading``: ``load_prm`` (scoring: every weight from the checkpoint) and ``load_for_training``;
- ``examples``: rows of any step-level format as labelled token sequences; ``losses``: the step losses;
- ``scoring``: ``PRM``, per-step P(correct) in one pass per solution; ``baseline``: the policy's own verifier,
  a zero-training scorer with the same API.

The trainer (``train.prm``, its recipe ``train.prm_recipe``) sits beside the other trainers, the evaluation run
(``runners.prm_eval``) beside the other runners. docs/prm.md has the format, heads and losses. Torch and
transformers are imported only by ``heads``, ``loading``, ``losses`` and when a model is loaded, so
``import posttrainlab.prm`` is cheap.
"""

from posttrainlab.prm.scoring import PRM

__all__ = ["PRM"]

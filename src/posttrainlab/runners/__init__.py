"""Runners: the evaluation runs that load models, sample, cache and write files (the metrics are ``eval``'s).

One module per ``posttrain eval`` verb, each a ``run``-like function over a settings object
(``runners.settings``) that the CLI, the quickstart and the Python API build alike:

- ``policy``: ``evaluate_policy``, a policy on arith-v1 (``PolicyEvalSettings``);
- ``prm_eval``: a PRM on step-labelled solutions (``PRMEvalSettings``);
- ``best_of_n``: n samples of a policy, one picked by a PRM (``BestOfNSettings``);
- ``beam_search``: PRM-guided step-level beam search (``BeamSettings``), the search itself in ``beam_algorithm``;
- ``judge`` (with ``judge_client``, its endpoint client): an LLM judge on Math-Shepherd-614 (``JudgeSettings``);
- ``compare``: per-problem outcomes read back from evaluation outputs, for ``posttrain eval compare``;
- ``prm_plots``: the figures the PRM runs write (reliability diagram, best-of-N curves).
"""

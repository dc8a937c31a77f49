"""Metrics: exact, documented metric functions for policies, PRMs and LLM judges (docs/design.md "Metric
definitions").

Pure functions of lists, one module per topic: no torch, no model, no file read or written (``tests/test_layout.py``
checks it on the source). What loads models, samples, caches and writes files is in ``posttrainlab.runners``.

- ``counts``: the binary confusion counts every precision/recall/F1 here is built from;
- ``intervals``: Wilson intervals, pass@k; ``sampled``: pass@1 and maj@K over K samples;
- ``policy``: accuracy per category, outcome shares, format rate, preference accuracy;
- ``step_metrics``: step-level precision/recall/F1 of the wrong class, AUROC, ProcessBench
  first-error F1 (with a threshold sweep), expected calibration error, per-position rates;
  ``prm_metrics`` gathers them for a PRM; ``within_problem``: right against wrong solutions of one problem;
- ``aggregation`` and ``best_of_n``: a solution's score from its step scores, best-of-N's selectors and accuracy;
- ``span_locate``: finding a judge's copied span in the response (exact, whitespace, fuzzy);
- ``span_metrics``: the Math-Shepherd-614 span protocol under the ``label-aligned`` rule (reads the
  gold labels) and the ``gold-independent`` rule, and case-level metrics; ``judge_metrics`` gathers them;
- ``agreement``: agreement between two annotations (Cohen's kappa, span overlap);
- ``compare`` and ``sampled_compare``: paired comparison of two evaluations (Newcombe, McNemar, paired t).

Conventions: fractions lie in [0, 1]; a ratio whose denominator is 0 is 0.0 (the ``zero_division=0``
convention of scikit-learn), and a metric that is undefined for the input (AUROC with one class,
calibration of nothing) is ``None``, never NaN.
"""

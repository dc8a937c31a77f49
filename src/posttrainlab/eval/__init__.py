"""Evaluation: exact, documented metrics for PRMs and LLM judges (docs/design.md "Metric definitions").

The metric layer is pure functions of lists, one module per topic:

- ``counts``: the binary confusion counts every precision/recall/F1 here is built from;
- ``step_metrics``: step-level precision/recall/F1 of the wrong class, AUROC, ProcessBench
  first-error F1 (with a threshold sweep), expected calibration error, per-position rates;
- ``span_locate``: finding a judge's copied span in the response (exact, whitespace, fuzzy);
- ``span_metrics``: the Math-Shepherd-614 span protocol under the ``label-aligned`` rule (reads the
  gold labels) and the ``gold-independent`` rule, and case-level metrics.

Conventions: fractions lie in [0, 1]; a ratio whose denominator is 0 is 0.0 (the ``zero_division=0``
convention of scikit-learn), and a metric that is undefined for the input (AUROC with one class,
calibration of nothing) is ``None``, never NaN.
"""

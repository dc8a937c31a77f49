"""posttrainlab: process supervision of math reasoning.

Build step-labelled data, train and evaluate process reward models and step-level hallucination
detectors, judge LLM judges with exact metrics, and compare SFT / DPO / GRPO on checkable tasks.

Start with the ``posttrain`` command (``posttrain --help``); the library is organised by concern:
``data`` (datasets, formats, manifests, loaders), ``grading`` (answer checkers), and the training,
evaluation and serving layers built on them.
"""

__version__ = "0.1.0"

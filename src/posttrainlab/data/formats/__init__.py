"""Step-level corpora: the step view, SHARP spans, Math-Shepherd, MC values, ProcessBench.

Process reward models learn from corpora in several shapes (docs/design.md "Data contracts"). One module
per format reads, checks and converts it; every conversion goes through the SHARP step view
(``step.py``). ``registry.FORMATS`` maps the five format names to their validators, stats and step
readers (``to_steps``: a row as a ``step.StepRow``, the one row type PRM training and evaluation
read); ``readers.iter_rows`` streams rows from local files and ``hf://`` paths. Nothing here imports
torch. See docs/formats.md for each format, its invariants and what each conversion keeps.
"""

from posttrainlab.data.formats.registry import FORMATS, STEP_FORMATS, Format, get_format
from posttrainlab.data.formats.schema import RowError
from posttrainlab.data.formats.step import StepRow

__all__ = ["FORMATS", "STEP_FORMATS", "Format", "RowError", "StepRow", "get_format"]

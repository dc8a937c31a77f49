"""Step-level corpora: the step view, SHARP spans, Math-Shepherd, MC values, ProcessBench.

Process reward models learn from corpora in several shapes (DESIGN.md "Data contracts"). One module
per format reads, checks and converts it; every conversion goes through the SHARP step view
(``step.py``). ``registry.FORMATS`` maps the five format names to their validators and stats;
``readers.iter_rows`` streams rows from local files and ``hf://`` paths. Nothing here imports torch.
See docs/formats.md for each format, its invariants and what each conversion keeps.
"""

from posttrainlab.data.formats.registry import FORMATS, Format, get_format
from posttrainlab.data.formats.schema import RowError

__all__ = ["FORMATS", "Format", "RowError", "get_format"]

"""Answer graders: the ground floor of posttrainlab (pure answer checking, no torch).

One interface for every grader: ``grader.grade(response, answer) -> Grade``.
"""

from posttrainlab.grading.base import OUTCOMES, Grade, Grader

__all__ = ["OUTCOMES", "Grade", "Grader", "get_grader", "parse_grader_spec"]


def parse_grader_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME[:KEY=VALUE,...]`` as ``(name, settings)``: how a recipe's one ``grader`` string carries settings.

    >>> parse_grader_spec("math:float_rounding=2,strict=false")
    ('math', {'float_rounding': '2', 'strict': 'false'})
    """
    from posttrainlab.errors import BadInput

    name, _, rest = spec.partition(":")
    settings = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise BadInput(f"grader {spec!r}: settings go as NAME:KEY=VALUE,KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return name.strip(), settings


def get_grader(spec: str, **settings) -> Grader:
    """A grader by name: ``arith`` (arith-v1's ``Answer: <int>`` line) or ``math`` (math-verify).

    ``math`` takes ``MathGraderConfig``'s settings, as keywords or in the spec
    (``get_grader("math:float_rounding=2,strict=false")``), plus ``workers`` / ``start_method`` as keywords.
    """
    from posttrainlab.errors import BadInput

    name, from_spec = parse_grader_spec(spec)
    if name == "arith":
        from posttrainlab.grading.arith import ArithGrader

        if from_spec or settings:
            keys = ", ".join([*from_spec, *settings])
            raise BadInput(f"grader {spec!r}: the arith grader takes no settings, got {keys}")
        return ArithGrader()
    if name == "math":
        from posttrainlab.grading.math import MathGrader, MathGraderConfig

        return MathGrader(MathGraderConfig().replace(from_spec), **settings)
    raise BadInput(f"unknown grader {name!r}: choose 'arith' or 'math'")

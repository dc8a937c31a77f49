"""Answer graders: the ground floor of posttrainlab (pure answer checking, no torch).

One interface for every grader: ``grader.grade(response, answer) -> Grade``.
"""

from posttrainlab.grading.base import OUTCOMES, Grade, Grader

__all__ = ["OUTCOMES", "Grade", "Grader", "get_grader"]


def get_grader(name: str, **kwargs) -> Grader:
    """A grader by name: ``arith`` (arith-v1's ``Answer: <int>`` line) or ``math`` (math-verify)."""
    if name == "arith":
        from posttrainlab.grading.arith import ArithGrader

        return ArithGrader(**kwargs)
    if name == "math":
        from posttrainlab.grading.math import MathGrader

        return MathGrader(**kwargs)
    from posttrainlab.errors import BadInput

    raise BadInput(f"unknown grader {name!r}: choose 'arith' or 'math'")

"""Where the time of `posttrain data prepare` goes.

Times, in one run on the same machine, (1) a full prepare of arith-v1 1.3.0 into a temporary folder
(generate, grade every pair, check contamination, serialise, hash, write) and (2) one part of the
same work, the grader verification pass alone over every record, and prints the ratio last.

    .venv/bin/python bench/bench_prepare.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from posttrainlab.data.arith import generator
from posttrainlab.data.arith.release import prepare
from posttrainlab.grading.arith import ArithGrader


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    built = generator.build()
    grader = ArithGrader()
    split_of = {s.name: s for s in generator.SPLITS}
    n_records = sum(len(r) for r in built.records.values())

    def full() -> None:
        with tempfile.TemporaryDirectory() as d:
            prepare(Path(d) / "arith-v1")

    def grading_pass() -> None:
        for name, records in built.records.items():
            generator._verify_grades(split_of[name], records, grader)

    def draw_only() -> None:
        generator.draw_pools()

    t_full, t_grade, t_draw = best_of(full), best_of(grading_pass), best_of(draw_only)
    print(f"records built            : {n_records}")
    print(f"full prepare (median of 5): {t_full:.3f} s  ({n_records / t_full:,.0f} records/s)")
    print(f"drawing the pools alone  : {t_draw:.3f} s  ({t_draw / t_full:.0%} of prepare)")
    print(f"grader verification alone: {t_grade:.3f} s  ({t_grade / t_full:.0%} of prepare)")
    print(f"ratio full prepare / grader pass: {t_full / t_grade:.2f}x")


if __name__ == "__main__":
    main()

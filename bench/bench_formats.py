"""Convert and validate a 200k-row SHARP span file: streaming vs loading it whole.

posttrainlab reads step-level corpora as streams (``readers.iter_rows``: one JSON line at a time) so
that files of a few hundred thousand rows (Polaris MC has 126,987) are checked and converted in
bounded memory. This benchmark measures what that buys, side by side in one run:

- ``stream``: ``validate_span(iter_rows(FILE))``, then
  ``write_rows(OUT, convert_span_rows(iter_rows(FILE)))``;
- ``whole``: every row parsed into one list first, then validated, converted into a second list, written.

Each mode runs in a fresh subprocess so that its peak resident memory (``VmHWM``) is its own; both
outputs must be byte-identical. Rows/s counts input rows over the validate+convert work (interpreter
start excluded). The ratios come last.

    .venv/bin/python bench/bench_formats.py            # 200,000 rows, about a minute on 2 cores
    .venv/bin/python bench/bench_formats.py --rows 20000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = "the of a to is we so then add take half twice total left each more less sum value steps answer".split()


def make_row(rng: random.Random) -> dict:
    """A synthetic span-view row: 3-6 pieces; half the rows hold a span, a fifth of those across pieces."""
    pieces = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 12))) + f" = {rng.randint(0, 999)}."
        for _ in range(rng.randint(3, 6))
    ]
    annotation = list(pieces)
    if rng.random() < 0.5:
        k = rng.randrange(len(pieces))
        piece = pieces[k]
        start = rng.randrange(len(piece) - 1)
        if rng.random() < 0.2 and k + 1 < len(pieces):  # open here, close in the next piece
            annotation[k] = piece[:start] + "<HAL>" + piece[start:]
            nxt = pieces[k + 1]
            cut = rng.randint(1, len(nxt))
            annotation[k + 1] = nxt[:cut] + "</HAL>" + nxt[cut:]
        else:
            end = rng.randint(start + 1, len(piece))
            annotation[k] = piece[:start] + "<HAL>" + piece[start:end] + "</HAL>" + piece[end:]
    question = "What is " + " ".join(rng.choice(WORDS) for _ in range(8)) + "?"
    return {"question": question, "model_answer": pieces, "hallucination_annotation": annotation}


def generate(path: Path, n: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(n):
            f.write(json.dumps(make_row(rng), ensure_ascii=False) + "\n")


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB.

    ``VmHWM`` from /proc is per address space, so it starts afresh in a new process; ``ru_maxrss`` (the
    fallback off Linux) survives ``exec`` on Linux and would carry the parent's peak into the child.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(mode: str, src: Path, out: Path) -> None:
    """Run one mode and print ``{"rows", "bad", "seconds", "maxrss_mb", "base_mb"}`` as JSON."""
    from posttrainlab.data.formats.readers import iter_rows
    from posttrainlab.data.formats.sharp import convert_span_rows, validate_span
    from posttrainlab.data.formats.writers import write_rows

    base = peak_rss_mb()
    t0 = time.perf_counter()
    if mode == "stream":
        bad = sum(1 for _ in validate_span(iter_rows(src)))
        n = write_rows(out, convert_span_rows(iter_rows(src)))
    else:
        with open(src, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        bad = len(list(validate_span(rows)))
        converted = list(convert_span_rows(rows))
        n = write_rows(out, converted)
    seconds = time.perf_counter() - t0
    print(json.dumps({"rows": n, "bad": bad, "seconds": seconds, "maxrss_mb": peak_rss_mb(), "base_mb": base}))


def run_mode(mode: str, src: Path, out: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, str(src), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SRC", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, src, out = args.child
        child(mode, Path(src), Path(out))
        return
    with tempfile.TemporaryDirectory(prefix="bench_formats.") as tmp:
        src = Path(tmp) / "span.jsonl"
        t0 = time.perf_counter()
        generate(src, args.rows)
        size_mb = src.stat().st_size / 2**20
        print(f"generated {args.rows:,} span rows ({size_mb:.1f} MiB) in {time.perf_counter() - t0:.1f} s")
        results = {mode: run_mode(mode, src, Path(tmp) / f"{mode}.jsonl") for mode in ("stream", "whole")}
    stream, whole = results["stream"], results["whole"]
    assert stream["sha256"] == whole["sha256"], "the two modes wrote different outputs"
    assert stream["rows"] == whole["rows"] == args.rows and stream["bad"] == whole["bad"] == 0
    print(f"{'mode':<8}{'rows':>10}{'seconds':>10}{'rows/s':>12}{'peak RSS MiB':>15}{'after imports':>15}")
    for mode, r in results.items():
        rate = r["rows"] / r["seconds"]
        print(
            f"{mode:<8}{r['rows']:>10,}{r['seconds']:>10.2f}{rate:>12,.0f}{r['maxrss_mb']:>15.1f}{r['base_mb']:>15.1f}"
        )
    print(f"outputs identical (sha256 {stream['sha256'][:12]}...)")
    speed = (stream["rows"] / stream["seconds"]) / (whole["rows"] / whole["seconds"])
    print(f"speed stream/whole: {speed:.2f}x")
    grew = {mode: r["maxrss_mb"] - r["base_mb"] for mode, r in results.items()}
    print(
        f"peak memory whole/stream: {whole['maxrss_mb'] / stream['maxrss_mb']:.1f}x "
        f"(the work added {grew['whole']:.0f} MiB vs {grew['stream']:.0f} MiB to the peak after imports)"
    )


if __name__ == "__main__":
    main()

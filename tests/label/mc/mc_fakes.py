"""Helpers for MC labelling tests: small arith-v1 problem files and fake backends."""

from __future__ import annotations

import json
import random
from pathlib import Path

from posttrainlab.generation.shared_prefix import PrefixRequest


def arith_rows(k: int, seed: int = 0) -> list[dict]:
    """``k`` arith-v1 problem rows (``id, category, prompt, answer``), drawn as the release draws them."""
    from posttrainlab.data.arith.problems import CATEGORIES, draw

    rng, taken, rows = random.Random(seed), set(), []
    for i in range(k):
        p = draw(CATEGORIES[i % len(CATEGORIES)], rng, taken)
        rows.append({"id": f"p{i:03d}", "category": p.category, "prompt": p.prompt, "answer": p.answer})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class TableBackend:
    """Continuations looked up by prefix text (``table[prefix]`` is cycled to ``n``); records every request."""

    def __init__(self, table: dict[str, list[str]], default: list[str] | None = None, fail_after: int | None = None):
        self.table, self.default, self.fail_after = table, default or ["Answer: -1"], fail_after
        self.requests: list[PrefixRequest] = []
        self.calls = 0

    def sample_continuations(self, requests, *, n=1, **kw):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("killed")
        self.calls += 1
        self.requests += list(requests)
        out = []
        for r in requests:
            options = self.table.get(r.prefix, self.default)
            out.append([options[i % len(options)] for i in range(n)])
        return out

    def generate(self, prompts, **kw):  # pragma: no cover - labelling uses sample_continuations
        raise AssertionError("not used")


class Killing:
    """Wrap a backend; raise after ``after`` calls (a run killed between two problems)."""

    def __init__(self, inner, after: int):
        self.inner, self.after, self.calls, self.rollouts = inner, after, 0, 0

    def sample_continuations(self, requests, *, n=1, **kw):
        if self.calls >= self.after:
            raise KeyboardInterrupt
        self.calls += 1
        self.rollouts += n * len(requests)
        return self.inner.sample_continuations(requests, n=n, **kw)

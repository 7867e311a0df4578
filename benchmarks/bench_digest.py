"""Benchmark: our validating ``action_digest`` against the reference ``aais.action_digest``.

Run with ``python benchmarks/bench_digest.py``. A fixed-seed corpus of realistic
actions (small, medium, large arguments) is digested by every contender in the
same run; each timing is the best of several repeats (``time.perf_counter``).

Contenders:
- ``ours(mapping)``: ``action_digest(dict)`` - I-JSON check, pydantic validation, RFC 8785.
- ``ours(model)``: ``action_digest(Action)`` - the action is already a validated model.
- ``sha256_digest``: ``sha256_digest(dict)`` - our raw path, I-JSON check + RFC 8785 only.
- ``reference``: ``aais.action_digest(dict)`` - RFC 8785 with no validation.
"""

from __future__ import annotations

import argparse
import random
import string
import time
from collections.abc import Callable
from typing import Any

import aais

from aais_langgraph.protocol import Action, action_digest, sha256_digest

SEED = 20260830
SIZES = {"small": 400, "medium": 100, "large": 10}


def _word(rng: random.Random, low: int = 3, high: int = 12) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(low, high)))


def _text(rng: random.Random, words: int) -> str:
    pool = [*(_word(rng) for _ in range(50)), "naïve", "Grüße", "日本語", "😀"]
    return " ".join(rng.choice(pool) for _ in range(words))


def small_action(rng: random.Random) -> dict[str, Any]:
    """A shell command: a handful of short string arguments."""
    command = f"{rng.choice(['node --check', 'ls -la', 'git status', 'pytest -q'])} {_word(rng)}"
    return {
        "kind": "process.exec",
        "name": "shell.exec",
        "summary": f"Run {command}",
        "arguments": {"command": command, "timeout_s": rng.randint(1, 600)},
        "working_directory": f"/workspace/{_word(rng)}",
        "effects": ["Starts a local process"],
    }


def medium_action(rng: random.Random) -> dict[str, Any]:
    """An HTTP call: headers, query, a JSON body with nested records and mixed numbers."""
    return {
        "kind": "http.request",
        "name": "http.post",
        "summary": f"POST to the {_word(rng)} API",
        "arguments": {
            "url": f"https://api.example.com/v1/{_word(rng)}/{rng.randint(1, 10**6)}",
            "headers": {f"x-{_word(rng)}": _word(rng, 8, 32) for _ in range(8)},
            "query": {_word(rng): rng.randint(-(10**9), 10**9) for _ in range(5)},
            "body": {
                "title": _text(rng, 8),
                "tags": [_word(rng) for _ in range(6)],
                "items": [
                    {
                        "sku": _word(rng, 6, 6).upper(),
                        "quantity": rng.randint(1, 50),
                        "price": round(rng.uniform(0.5, 999.0), 2),
                        "gift": rng.random() < 0.2,
                        "note": None,
                    }
                    for _ in range(12)
                ],
            },
        },
        "resource": "https://api.example.com/",
        "effects": ["Sends data to an external service", "May charge the account"],
    }


def large_action(rng: random.Random) -> dict[str, Any]:
    """A file write: a long text body plus a few hundred structured rows."""
    return {
        "kind": "filesystem.write",
        "name": "fs.write_file",
        "summary": "Write the generated report",
        "arguments": {
            "path": f"/workspace/reports/{_word(rng)}.md",
            "content": _text(rng, 3000),
            "rows": [
                {
                    "id": rng.randint(0, 2**53 - 1),
                    "name": _text(rng, 3),
                    "score": rng.uniform(-1e6, 1e6),
                    "flags": [rng.random() < 0.5 for _ in range(4)],
                    "meta": {"source": _word(rng), "rank": index},
                }
                for index in range(300)
            ],
        },
        "effects": ["Overwrites a file in the workspace"],
    }


BUILDERS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "small": small_action,
    "medium": medium_action,
    "large": large_action,
}


def corpus(size: str, count: int) -> list[dict[str, Any]]:
    """``count`` actions of one size class, the same on every run."""
    rng = random.Random(f"{SEED}-{size}")
    return [BUILDERS[size](rng) for _ in range(count)]


def best_time(function: Callable[[Any], object], inputs: list[Any], repeats: int) -> float:
    """Best wall time over ``repeats`` passes of ``function`` over every input."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for item in inputs:
            function(item)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Time every contender on every size class and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply corpus sizes")
    options = parser.parse_args()

    header = f"{'size':<7}{'n':>5}  {'contender':<15}{'ops/s':>12}{'us/op':>10}{'ours/ref':>10}"
    print(header)
    print("-" * len(header))
    for size, count in SIZES.items():
        actions = corpus(size, max(1, int(count * options.scale)))
        models = [Action.model_validate(action) for action in actions]
        expected = [aais.action_digest(action) for action in actions]
        assert [action_digest(action) for action in actions] == expected, "digest mismatch"
        assert [action_digest(model) for model in models] == expected, "digest mismatch"

        timings = {
            "reference": best_time(aais.action_digest, actions, options.repeats),
            "ours(mapping)": best_time(action_digest, actions, options.repeats),
            "ours(model)": best_time(action_digest, models, options.repeats),
            "sha256_digest": best_time(sha256_digest, actions, options.repeats),
        }
        reference = timings["reference"]
        for name, seconds in timings.items():
            ratio = seconds / reference
            print(
                f"{size:<7}{len(actions):>5}  {name:<15}{len(actions) / seconds:>12,.0f}"
                f"{seconds / len(actions) * 1e6:>10.1f}{ratio:>9.2f}x"
            )
    print("\nours/ref is time relative to aais.action_digest (lower is faster).")


if __name__ == "__main__":
    main()

"""Validation time vs input size: it must grow linearly (issue 9, item 6).

    python bench/bench_validate_scaling.py [--max-kb 2048]

For each shape of hostile input (one long value line, one long line without `=`, many keys,
many array items, a long line with a secret-looking key) it validates inputs of doubling size
and prints the seconds and the ratio of each time to the previous one: about 2 is linear, about 4
quadratic. Prints only; no timed assertion (CI machines are too noisy for one).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from primenb.config import check
from primenb.config.templates import starter

BASE = starter()


def long_string(n: int) -> str:
    # a type error on a long line: its diagnostic line is scanned for secret-looking keys
    return BASE.replace("max_steps = 300", f'max_steps = "{"a" * n}"')


def long_bare_line(n: int) -> str:
    return BASE + "\n" + "a" * n + "\n"  # a syntax error with a 'key' of n characters


def long_secret_line(n: int) -> str:
    return BASE + f'\napi_key = "{"b" * n}"\n'


def many_keys(n: int) -> str:
    return BASE + "\n[primenb.extra]\n" + "".join(f"k{i} = {i}\n" for i in range(n // 12))


def long_array(n: int) -> str:
    return BASE + "\n[primenb.arr]\nv = [" + ", ".join(["1"] * (n // 3)) + "]\n"


SHAPES: dict[str, Callable[[int], str]] = {
    "long string value": long_string,
    "long line without '='": long_bare_line,
    "long secret line": long_secret_line,
    "many keys": many_keys,
    "long array": long_array,
}


def timed(text: str) -> float:
    t0 = time.perf_counter()
    check(text)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-kb", type=int, default=1024)
    args = parser.parse_args()
    sizes = []
    n = 16 * 1024
    while n <= args.max_kb * 1024:
        sizes.append(n)
        n *= 2
    timed(BASE)  # warm imports
    for shape, make in SHAPES.items():
        print(f"{shape}:")
        prev = None
        for size in sizes:
            s = timed(make(size))
            ratio = f"x{s / prev:.2f}" if prev else ""
            print(f"  {size // 1024:6d} KB  {s:8.3f} s  {ratio}")
            prev = max(s, 1e-6)
        print()


if __name__ == "__main__":
    main()

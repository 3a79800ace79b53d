"""Runs the test suite once per Keras backend and summarises the results.

    python tests/all_backends.py                 # jax, tensorflow and torch
    python tests/all_backends.py --backends jax  # one backend
    python tests/all_backends.py -- -k attention # extra pytest arguments

Each backend runs in its own pytest process (a Keras backend is chosen once
per process), so the suite pays each backend's import once. Backends run
side by side (`--jobs`, default 2); each one's output is printed when it ends.
Exits non-zero if any backend fails or collects no test.

Tests marked `one_backend` (plumbing that behaves the same under every
backend: a recipe's flags, files and resumption) run in one backend's run
only, `--one-backend` (default torch, the quickest to run them), when
several backends run.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)

from zoo.testing.backends import (  # noqa: E402
    BACKENDS,
    python_command,
    run_on_backends,
)


def summary_line(output):
    """pytest's closing line, e.g. '120 passed, 2 skipped in 35.1s'."""
    lines = [
        item.strip("= ") for item in output.strip().splitlines() if item.strip()
    ]
    for line in reversed(lines):
        if re.search(r"\d+ (passed|failed|error|skipped|no tests ran)", line):
            return line
    return lines[-1] if lines else "(no output)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS
    )
    parser.add_argument("--jobs", type=int, default=2, help="backends at once")
    parser.add_argument(
        "--one-backend",
        default="torch",
        choices=BACKENDS,
        help="the backend whose run takes the tests marked one_backend",
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest")
    args = parser.parse_args(argv)
    if len(args.backends) > 1 and args.one_backend in args.backends:
        os.environ.setdefault("ZOO_TESTS_ONE_BACKEND", args.one_backend)

    start = time.perf_counter()
    # The suite compiles many identical JAX programs (one smoke model in
    # several tests, the workers of the cross-backend checks); XLA's
    # persistent compilation cache shares them within the run (about a
    # tenth of the JAX run's time). A fresh folder per run, removed after.
    cache = tempfile.mkdtemp(prefix="zoo-jax-cache-")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    if args.jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
        # Backends side by side share the cores: PyTorch's OpenMP threads,
        # one per core each, spin against the other run's (a PyTorch RNN
        # test took 13 s beside a busy core with 2 threads, 6.5 s with 1).
        os.environ["OMP_NUM_THREADS"] = str(
            max(1, (os.cpu_count() or 1) // args.jobs)
        )
    command = python_command(
        "-m", "pytest", "-q", "-p", "no:cacheprovider", *args.pytest_args
    )
    results = []
    try:
        runs = run_on_backends(command, args.backends, args.jobs, cwd=ROOT)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    for run in runs:
        print(f"\n{'=' * 30} KERAS_BACKEND={run.backend} {'=' * 30}")
        print(run.output.rstrip())
        results.append(
            (run.backend, run.returncode, summary_line(run.output), run.seconds)
        )

    print(f"\n{'=' * 30} summary {'=' * 30}")
    failed = False
    for backend, code, line, seconds in results:
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        failed |= code != 0
        print(f"{backend:>10}: {status:<16} {line}  [{seconds:.0f} s wall]")
    print(f"total wall time: {time.perf_counter() - start:.0f} s")
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for _, code, line, _ in results:
        for number, word in re.findall(
            r"(\d+) (passed|failed|errors?|skipped)", line
        ):
            word = "failed" if word.startswith("error") else word
            counts[word] += int(number)
        if code != 0 and not re.search(r"\d+ (failed|error)", line):
            counts["failed"] += 1  # a crash or an empty run counts as a failure
    closing = f"{counts['passed']} passed, {counts['failed']} failed"
    if counts["skipped"]:
        closing += f", {counts['skipped']} skipped"
    print(f"all: {closing}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

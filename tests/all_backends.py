"""Runs the test suite once per Keras backend and summarises the results.

    python tests/all_backends.py                 # jax, tensorflow and torch
    python tests/all_backends.py --backends jax  # one backend
    python tests/all_backends.py -- -k attention # extra pytest arguments

A Keras backend is chosen once per process, so each backend runs in its own
pytest processes. The whole suite under several backends runs in shards:
each backend's test files are split into `--shards` groups of about equal
time (by the times in tests/durations.json), and the groups run `--jobs` at
a time (default 2, one per core), longest first, so that the cores finish
together instead of one waiting on the slowest backend. With test paths
given, each backend runs its tests in one process. Each process' output is
printed when it ends. Exits non-zero if any process fails or collects no
test. `--record-durations` rewrites tests/durations.json from the run.

Tests marked `one_backend` (plumbing that behaves the same under every
backend: a recipe's flags, files, resumption and whole smoke run, whose
model the cross-backend check trains, saves and runs on every backend)
run in one backend's run only, `--one-backend` (default torch, the
quickest to run them), when several backends run.
"""

import argparse
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)

from zoo.testing.backends import (  # noqa: E402
    BACKENDS,
    python_command,
    run_on_backend,
)

NO_TESTS = 5  # pytest's exit status when it collects no test
DURATIONS = os.path.join(ROOT, "tests", "durations.json")


def summary_line(output):
    """pytest's closing line, e.g. '120 passed, 2 skipped in 35.1s'."""
    lines = [
        item.strip("= ") for item in output.strip().splitlines() if item.strip()
    ]
    for line in reversed(lines):
        if re.search(r"\d+ (passed|failed|error|skipped|no tests ran)", line):
            return line
    return lines[-1] if lines else "(no output)"


def test_files():
    """The suite's test files, relative to the repository root."""
    pattern = os.path.join(ROOT, "tests", "**", "test_*.py")
    return sorted(
        os.path.relpath(path, ROOT)
        for path in glob.glob(pattern, recursive=True)
    )


def names_paths(pytest_args):
    """Whether the pytest arguments name test files or folders."""
    return any(
        not arg.startswith("-")
        and os.path.exists(os.path.join(ROOT, arg.split("::")[0]))
        for arg in pytest_args
    )


def split_files(files, seconds, shards):
    """`files` in `shards` groups of about equal total `seconds` (a dict;
    a file without a time counts as the median one): the longest first,
    each to the group with the least so far. Returns `(total, files)`
    pairs, empty groups left out."""
    known = sorted(seconds.get(f) for f in files if f in seconds)
    typical = known[len(known) // 2] if known else 1.0
    groups = [[0.0, []] for _ in range(max(1, shards))]
    for name in sorted(files, key=lambda f: -seconds.get(f, typical)):
        group = min(groups, key=lambda g: g[0])
        group[0] += seconds.get(name, typical)
        group[1].append(name)
    return [(total, sorted(names)) for total, names in groups if names]


def read_durations():
    try:
        with open(DURATIONS) as file:
            return json.load(file)
    except (OSError, ValueError):
        return {}


def plan(backends, shards, pytest_args):
    """The processes to run: `(backend, estimated seconds, extra pytest
    arguments)`, longest first."""
    if shards <= 1 or names_paths(pytest_args):
        return [(backend, 0.0, []) for backend in backends]
    durations = read_durations()
    files = test_files()
    jobs = []
    for backend in backends:
        for total, group in split_files(
            files, durations.get(backend, {}), shards
        ):
            jobs.append((backend, total, group))
    return sorted(jobs, key=lambda job: -job[1])


def record_durations(outputs):
    """Merges the per-file times the processes wrote (`outputs`: backend
    -> JSON files) into tests/durations.json."""
    durations = read_durations()
    for backend, paths in outputs.items():
        seen = durations.setdefault(backend, {})
        for path in paths:
            try:
                with open(path) as file:
                    seen.update(json.load(file))
            except (OSError, ValueError):
                continue
        durations[backend] = {k: round(v, 1) for k, v in sorted(seen.items())}
    with open(DURATIONS + ".tmp", "w") as file:
        json.dump(durations, file, indent=1, sort_keys=True)
        file.write("\n")
    os.replace(DURATIONS + ".tmp", DURATIONS)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--backends", nargs="+", default=list(BACKENDS), choices=BACKENDS
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes at once")
    parser.add_argument(
        "--shards",
        type=int,
        default=2,
        help="processes per backend for the whole suite (1: one each)",
    )
    parser.add_argument(
        "--record-durations",
        action="store_true",
        help="write each test file's time into tests/durations.json",
    )
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
    if len(args.backends) == 1:
        args.shards = 1

    start = time.perf_counter()
    # The suite compiles many identical JAX programs (one smoke model in
    # several tests, the workers of the cross-backend checks); XLA's
    # persistent compilation cache shares them within the run (about a
    # tenth of the JAX run's time). A fresh folder per run, removed after.
    cache = tempfile.mkdtemp(prefix="zoo-jax-cache-")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", cache)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    if args.jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
        # Processes side by side share the cores: PyTorch's OpenMP threads,
        # one per core each, spin against the other run's (a PyTorch RNN
        # test took 13 s beside a busy core with 2 threads, 6.5 s with 1).
        os.environ["OMP_NUM_THREADS"] = str(
            max(1, (os.cpu_count() or 1) // args.jobs)
        )
    jobs = plan(args.backends, args.shards, args.pytest_args)
    outputs = {}

    def run(number, job):
        backend, _, files = job
        env = {}
        if args.record_durations:
            env["ZOO_TEST_DURATIONS_OUT"] = os.path.join(
                cache, f"durations-{number}.json"
            )
            outputs.setdefault(backend, []).append(
                env["ZOO_TEST_DURATIONS_OUT"]
            )
        command = python_command(
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            *args.pytest_args,
            *files,
        )
        return run_on_backend(command, backend, cwd=ROOT, env=env)

    try:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run, n, job) for n, job in enumerate(jobs)]
            runs = [future.result() for future in futures]
        if args.record_durations:
            record_durations(outputs)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    results = []
    for backend in args.backends:
        mine = [r for r in runs if r.backend == backend]
        if any(r.returncode != NO_TESTS for r in mine):
            # A filter (-k, -m) may select nothing in one part: fine when
            # another part of the backend ran tests.
            for r in mine:
                r.returncode = 0 if r.returncode == NO_TESTS else r.returncode
        for part, run in enumerate(mine, 1):
            shard = f" (part {part} of {len(mine)})" if len(mine) > 1 else ""
            print(f"\n{'=' * 30} KERAS_BACKEND={backend}{shard} {'=' * 30}")
            print(run.output.rstrip())
            results.append(
                (
                    backend + (f" {part}/{len(mine)}" if shard else ""),
                    run.returncode,
                    summary_line(run.output),
                    run.seconds,
                )
            )

    print(f"\n{'=' * 30} summary {'=' * 30}")
    failed = False
    for backend, code, line, seconds in results:
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        failed |= code != 0
        print(f"{backend:>14}: {status:<16} {line}  [{seconds:.0f} s wall]")
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

"""Runs a benchmark once per backend, each in a fresh Python process: Keras
picks its backend when it is first imported, so one process measures one.

A benchmark script calls `run_worker(__file__, backend, argv)` for each
backend; that re-runs the script with `--worker` and the same flags, under
`KERAS_BACKEND=backend`, and the worker prints its result with
`print_result`.
"""

import argparse
import json
import os
import subprocess
import sys

BACKENDS = ("jax", "tensorflow", "torch")
RESULT_PREFIX = "RESULT "


def benchmark_parser(description):
    """An `ArgumentParser` with the flags every per-backend benchmark takes:
    `--backends` (read by `selected_backends`) and the hidden `--worker`
    (added by `run_worker`). The script adds its own."""
    parser = argparse.ArgumentParser(
        description=description,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--backends", default="all",
                        help="'all', 'current' or a comma-separated list")
    parser.add_argument("--worker", action="store_true",
                        help=argparse.SUPPRESS)
    return parser


def selected_backends(flag):
    """A `--backends` value -> backend names: "all", "current" (the backend
    Keras picks in this process) or a comma-separated list."""
    if flag == "current":
        import keras
        return [keras.backend.backend()]
    if flag == "all":
        return list(BACKENDS)
    return flag.split(",")


def print_result(result):
    """What a worker prints: one line its parent finds and parses."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_worker(script, backend, argv):
    """Runs `script --worker *argv` under `backend`; returns what it printed
    with `print_result`, or raises with the end of its stderr."""
    env = dict(os.environ, KERAS_BACKEND=backend)
    command = [sys.executable, os.path.abspath(script), "--worker", *argv]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    raise RuntimeError(f"{backend} worker failed:\n{done.stderr[-3000:]}")

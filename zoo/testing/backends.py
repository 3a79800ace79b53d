"""Running a command once per Keras backend, each in its own process.

Keras picks its backend when it is first imported, from `KERAS_BACKEND`, so
one process measures one backend. The test runner (`tests/all_backends.py`),
the benchmarks (`zoo.testing.benchmarks`) and the cross-backend check
(`zoo.testing.cross_backend`) all start their per-backend processes here.
"""

import dataclasses
import os
import subprocess
import sys
import time

BACKENDS = ("jax", "tensorflow", "torch")


def backend_env(backend, base=None):
    """The environment of a process under `backend`: `KERAS_BACKEND` set,
    TensorFlow's C++ start-up notices off (unless already configured).

    Args:
        backend: "jax", "tensorflow" or "torch".
        base: the environment to start from (default: this process').
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}; got {backend!r}.")
    env = dict(os.environ if base is None else base)
    env["KERAS_BACKEND"] = backend
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return env


def selected_backends(flag):
    """A `--backends` value -> backend names: "all", "current" (the backend
    Keras picks in this process) or a comma-separated list."""
    if flag == "current":
        import keras

        return [keras.backend.backend()]
    if flag == "all":
        return list(BACKENDS)
    names = [name.strip() for name in flag.split(",") if name.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if unknown or not names:
        raise ValueError(
            f"--backends takes 'all', 'current' or a comma-separated list of "
            f"{', '.join(BACKENDS)}; got {flag!r}."
        )
    return names


def start_on_backend(
    command, backend, cwd=None, stdout=None, stderr=subprocess.STDOUT
):
    """`subprocess.Popen(command)` under `backend` (for processes that must
    run side by side and talk through files)."""
    return subprocess.Popen(
        command, cwd=cwd, env=backend_env(backend), stdout=stdout, stderr=stderr
    )


@dataclasses.dataclass
class BackendRun:
    """What one process under one backend did."""

    backend: str
    returncode: int
    output: str  # stdout and stderr together
    seconds: float


def run_on_backend(command, backend, cwd=None, env=None):
    """Runs `command` under `backend` to the end (with the variables of
    `env` added to its environment); returns a `BackendRun`."""
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=cwd,
        env={**backend_env(backend), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return BackendRun(
        backend, done.returncode, done.stdout, time.perf_counter() - start
    )


def python_command(*args):
    """`[this interpreter, *args]`."""
    return [sys.executable, *args]

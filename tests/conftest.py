"""Shared fixtures. The suite runs once per backend (see tests/all_backends.py),
so every test here runs under whichever backend KERAS_BACKEND names."""

import os

# The suite checks numbers, not speed, and compiles many small programs
# (under JAX, every operation of an eager call is one): XLA's CPU code
# generation without its optimisation passes, with its older fusion
# emitters, and as one LLVM module instead of parts compiled on a thread
# pool, which compile small programs faster (JAX's programs and
# TensorFlow's `jit_compile`; set before the backend starts, and inherited
# by the recipes and workers the tests start). With the older emitters the
# JAX layer tests ran in 43 s against 100 s, side by side; in one part,
# the JAX GPT model tests took 63 s of CPU time against 72 s. benchmarks/
# measures speed with the defaults.
if not os.environ.get("XLA_FLAGS"):  # unset or empty
    os.environ["XLA_FLAGS"] = (
        "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"
        " --xla_cpu_parallel_codegen_split_count=1"
    )

import keras
import pytest

from zoo.precision import set_tf32


def pytest_configure(config):
    if keras.backend.backend() == "tensorflow":
        # TensorFlow's graph optimiser (Grappler) rewrites every traced
        # function before its first run; for the tests' small models that
        # costs more than it saves.
        import tensorflow as tf

        tf.config.optimizer.set_experimental_options(
            {"disable_meta_optimizer": True}
        )


def pytest_collection_modifyitems(config, items):
    """Tests marked `one_backend` check plumbing that is the same under
    every backend (a recipe's flags, files, resumption and whole smoke
    run, whose model tests/testing/test_cross_backend.py trains, saves and
    runs on every backend; a benchmark script staying runnable); when
    `tests/all_backends.py` runs the suite under several backends it
    names one of them in ZOO_TESTS_ONE_BACKEND, and the other runs skip
    these tests. `one_backend("jax")` names the backend
    itself (a test whose strictest checks are that backend's). A plain
    `pytest` runs them all."""
    default = os.environ.get("ZOO_TESTS_ONE_BACKEND")
    if not default:
        return
    current = keras.backend.backend()
    for item in items:
        marker = item.get_closest_marker("one_backend")
        if marker is None:
            continue
        one = marker.args[0] if marker.args else default
        if current != one:
            item.add_marker(
                pytest.mark.skip(
                    reason=f"the same under every backend: runs in the "
                    f"{one} run"
                )
            )


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend: {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts from float32, a fixed seed and a clean name scope."""
    keras.config.set_dtype_policy("float32")
    # Full float32 matrix products on a GPU too (the backends' defaults
    # differ, and TF32's 1e-3 relative error fails NumPy comparisons); no
    # effect on a CPU.
    set_tf32(False)
    keras.utils.set_random_seed(1234)
    # free_memory=False skips a full garbage collection (0.3 s a test).
    keras.backend.clear_session(free_memory=False)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def torch_compile_without_inductor(monkeypatch):
    """Decoding steps that `jit_compile=True` compiles under PyTorch go
    through TorchDynamo and AOTAutograd but not inductor's code generation
    (`torch.compile(backend="aot_eager")`): the same graphs, breaks and
    guards, without a C++ compiler's time (inductor costs 5-20 s a test
    with an empty cache, as on CI). For tests of what TorchDynamo does
    (graphs, which graph runs, whose weights it reads) and of scripts
    that only need the compiled path to run; the tokens inductor's code
    gives are tests/models/test_torch_compile.py's."""
    import functools

    from zoo.accelerator import compile_function
    from zoo.models import generation

    monkeypatch.setattr(
        generation,
        "compile_function",
        functools.partial(compile_function, backend="aot_eager"),
    )


_file_seconds = {}


def pytest_runtest_logreport(report):
    """With ZOO_TEST_DURATIONS_OUT set (by `tests/all_backends.py
    --record-durations`), each test file's time (setup, call and teardown
    of its tests) is summed and written there as JSON at the end."""
    if os.environ.get("ZOO_TEST_DURATIONS_OUT"):
        name = report.nodeid.split("::")[0]
        _file_seconds[name] = _file_seconds.get(name, 0.0) + report.duration


def pytest_sessionfinish(session):
    path = os.environ.get("ZOO_TEST_DURATIONS_OUT")
    if path and _file_seconds:
        import json

        with open(path, "w") as file:
            json.dump(_file_seconds, file)

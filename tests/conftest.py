"""Shared fixtures. The suite runs once per backend (see tests/all_backends.py),
so every test here runs under whichever backend KERAS_BACKEND names."""

import keras
import pytest


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend: {keras.backend.backend()}"


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts from float32, a fixed seed and a clean name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    # free_memory=False skips a full garbage collection (0.3 s a test).
    keras.backend.clear_session(free_memory=False)
    yield
    keras.config.set_dtype_policy("float32")

"""zoo.precision under the current backend: the dtype policy and an
explicit TF32 switch that the backend reports back."""

import keras
import pytest

from zoo import precision


@pytest.fixture(autouse=True)
def restore():
    yield
    precision.configure(None, tf32=True)


@pytest.mark.parametrize(
    "mixed, policy",
    [
        (None, "float32"),
        ("bfloat16", "mixed_bfloat16"),
        ("float16", "mixed_float16"),
    ],
)
def test_configure_sets_the_global_policy(mixed, policy):
    assert precision.configure(mixed) == policy
    assert keras.config.dtype_policy().name == policy
    layer = keras.layers.Dense(2)
    assert layer.dtype_policy.name == policy


@pytest.mark.parametrize("enabled", [False, True])
def test_tf32_is_set_explicitly_and_read_back(enabled):
    precision.configure(None, tf32=enabled)
    assert precision.tf32_enabled() is enabled


def test_an_unknown_policy_is_one_clear_error():
    with pytest.raises(ValueError, match="mixed must be one of"):
        precision.configure("float8")

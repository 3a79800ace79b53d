"""Numeric precision of a training run: Keras mixed-precision policies and
the TF32 matmul setting, made explicit on every backend.

    zoo.precision.configure(mixed="bfloat16", tf32=True)

- `mixed="bfloat16"`: `keras.config.set_dtype_policy("mixed_bfloat16")`;
  variables stay float32, computations run in bfloat16 (no loss scaling
  needed). `mixed="float16"`: "mixed_float16"; `Model.compile` then wraps
  the optimizer in `keras.optimizers.LossScaleOptimizer` (dynamic loss
  scaling), as Keras does for that policy. Models built afterwards take the
  policy; build them after this call.
- `tf32`: whether float32 matrix products may use TensorFloat-32 on GPUs
  that have it (Ampere and later). The backends' defaults differ (JAX and
  TensorFlow allow it, PyTorch does not), so the zoo sets it explicitly.
  It has no effect on CPUs.
"""

import keras

MIXED = ("bfloat16", "float16")


def configure(mixed=None, tf32=True):
    """Sets the global dtype policy and the TF32 setting.

    Args:
        mixed: None (float32), "bfloat16" or "float16".
        tf32: allow TensorFloat-32 for float32 matmuls and convolutions.

    Returns:
        The dtype policy's name, e.g. "mixed_bfloat16".

    Raises:
        ValueError: an unknown `mixed`.
    """
    if mixed is not None and mixed not in MIXED:
        raise ValueError(
            f"mixed must be one of {MIXED} or None; got {mixed!r}."
        )
    policy = f"mixed_{mixed}" if mixed else "float32"
    keras.config.set_dtype_policy(policy)
    set_tf32(tf32)
    return policy


def set_tf32(enabled):
    """Allows (or forbids) TensorFloat-32 in float32 matmuls on the current
    backend's GPU."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        jax.config.update(
            "jax_default_matmul_precision",
            "tensorfloat32" if enabled else "float32",
        )
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(enabled)
    elif backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def tf32_enabled():
    """Whether TensorFloat-32 is allowed on the current backend."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.config.jax_default_matmul_precision not in (
            "float32",
            "highest",
        )
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.config.experimental.tensor_float_32_execution_enabled()
    if backend == "torch":
        import torch

        return bool(torch.backends.cuda.matmul.allow_tf32)
    return False

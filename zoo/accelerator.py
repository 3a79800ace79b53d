"""Which accelerator this backend runs on, and its peak memory.

Reads each backend's own allocator statistics (imported lazily, here and
nowhere in the layers or models): JAX's `Device.memory_stats()`, PyTorch's
`torch.cuda.max_memory_allocated`, TensorFlow's
`tf.config.experimental.get_memory_info`.
"""

import keras


def accelerator():
    """`(name, peak_memory_bytes)` of the backend's first GPU, or
    `("cpu", None)` without one.

    The peak is the largest amount the backend's allocator has held on that
    GPU since the process started (JAX, TensorFlow) or since its last
    `torch.cuda.reset_peak_memory_stats` (PyTorch). Statistics are a bonus:
    where they cannot be read, the answer is `("unknown", None)`, never an
    error.

    Example:

    >>> name, peak = accelerator()   # e.g. ("NVIDIA H100 80GB HBM3", 2.1e9)
    """
    backend = keras.backend.backend()
    try:
        if backend == "jax":
            import jax

            device = jax.devices()[0]
            if device.platform != "gpu":
                return "cpu", None
            stats = device.memory_stats() or {}
            return device.device_kind, stats.get("peak_bytes_in_use")
        if backend == "torch":
            import torch

            if not torch.cuda.is_available():
                return "cpu", None
            return (torch.cuda.get_device_name(0),
                    int(torch.cuda.max_memory_allocated(0)))
        if backend == "tensorflow":
            import tensorflow as tf

            gpus = tf.config.list_logical_devices("GPU")
            if not gpus:
                return "cpu", None
            info = tf.config.experimental.get_memory_info("GPU:0")
            return gpus[0].name, int(info["peak"])
    except Exception:  # statistics are a bonus, never a failure
        return "unknown", None
    return "cpu", None

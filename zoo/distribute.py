"""Data- and model-parallel training on the engines Keras already has.

    strategy = zoo.distribute.configure("data")     # every local device
    with strategy.scope():                          # build and compile here
        model = ...
        model.compile(...)
    model.fit(dataset)                               # global batches

- JAX: `keras.distribution.DataParallel` (each global batch is split over
  the devices, the weights are replicated) or `keras.distribution.
  ModelParallel` with `transformer_layout_map`: the large kernels of the
  Transformer families (attention projections, MLP, token embeddings) are
  split over the "model" axis of a `(batch, model)` device mesh. Multi-host:
  start the same command on every host with `KERAS_DISTRIBUTION_JOB_ADDRESSES`
  (the coordinator's `host:port`), `KERAS_DISTRIBUTION_NUM_PROCESSES` and
  `KERAS_DISTRIBUTION_PROCESS_ID` set; `configure` then calls
  `keras.distribution.initialize()` (which wraps `jax.distributed.
  initialize`) and the devices are every host's.
- TensorFlow: `tf.distribute.MirroredStrategy` over the local devices (the
  strategy Keras supports under TensorFlow); data-parallel only.
- PyTorch: Keras has no distribution support under PyTorch; `configure`
  says so. Wrap the model in `torch.nn.parallel.DistributedDataParallel` in
  a custom loop (keras.io's "distributed training with PyTorch" guide).

The global batch size must be a multiple of the number of data-parallel
replicas. A model trained under a distribution saves a `.keras` file that
loads on one device.
"""

import contextlib
import os

import keras

MODES = ("data", "model")

# Weight paths (regular expressions matching the whole path) -> how each
# axis is split.
# "model" marks the axis split over the mesh's model axis; None replicates.
TRANSFORMER_LAYOUT = {
    # Attention: (hidden, heads, head_dim) kernels split by head.
    r".*/(query|key|value)/kernel": (None, "model", None),
    r".*/(query|key|value)/bias": ("model", None),
    r".*/attention_output/kernel": ("model", None, None),
    # MLP: the intermediate width.
    r".*/feedforward_intermediate_dense/kernel": (None, "model"),
    r".*/feedforward_intermediate_dense/bias": ("model",),
    r".*/feedforward_output_dense/kernel": ("model", None),
    # Token embeddings: the model width.
    r"(.*/)?token_embedding/embeddings": (None, "model"),
}


class _NoStrategy:
    """What `configure(None)` returns: `scope()` does nothing."""

    num_replicas_in_sync = 1

    def scope(self):
        return contextlib.nullcontext()


class _KerasDistribution:
    """A `keras.distribution` distribution, set globally, seen through the
    same `scope()` / `num_replicas_in_sync` as a `tf.distribute` strategy."""

    splits_batches_evenly = True  # every batch, the last one included

    def __init__(self, distribution, replicas):
        self.distribution = distribution
        self.num_replicas_in_sync = replicas

    def scope(self):
        return self.distribution.scope()


def transformer_layout_map(device_mesh, layout=None):
    """A `keras.distribution.LayoutMap` splitting the Transformer families'
    large kernels over `device_mesh`'s "model" axis.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh` with axes
            `("batch", "model")`.
        layout: `{regex matching whole weight paths: axes}`; default
            `TRANSFORMER_LAYOUT`. Each split axis must be divisible by the
            model axis' size (e.g. the number of heads, the MLP width).

    Example (on one device; with 8, a `(4, 2)` mesh splits every head
    kernel over 2 devices):

    >>> devices = ["cpu:0"]  # under JAX: keras.distribution.list_devices()
    >>> mesh = keras.distribution.DeviceMesh((1, 1), ("batch", "model"),
    ...                                      devices)
    >>> layout_map = transformer_layout_map(mesh)
    >>> layout_map["transformer_layer_0/self_attention/query/kernel"].axes
    (None, 'model', None)
    >>> layout_map["transformer_layer_0/feedforward_output_dense/kernel"].axes
    ('model', None)
    """
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for pattern, axes in (layout or TRANSFORMER_LAYOUT).items():
        layout_map[pattern] = axes
    return layout_map


def configure(mode, model_parallel=2, devices=None):
    """Sets up `mode` on the current backend.

    Args:
        mode: None (one device, nothing changes), "data" (data-parallel over
            every device) or "model" (JAX: a `(batch, model)` mesh with
            `model_parallel` devices on the model axis; the Transformer
            kernels are split over it, the batch over the rest).
        model_parallel: devices on the model axis for "model"; must divide
            the number of devices.
        devices: the devices to use; default every local (or, after
            `keras.distribution.initialize`, global) device.

    Returns:
        An object with `scope()` (build and compile the model inside it)
        and `num_replicas_in_sync` (the data-parallel replicas).

    Raises:
        ValueError: an unknown mode, a mode the backend does not support, or
            a model axis that does not divide the devices.
    """
    if mode is None:
        return _NoStrategy()
    if mode not in MODES:
        raise ValueError(
            f"distribute must be one of {MODES} or None; got {mode!r}."
        )
    backend = keras.backend.backend()
    if backend == "jax":
        return _configure_jax(mode, model_parallel, devices)
    if backend == "tensorflow":
        if mode == "model":
            raise ValueError(
                "distribute='model' needs the JAX backend: Keras' "
                "ModelParallel runs on JAX only (use 'data' under "
                "TensorFlow)."
            )
        import tensorflow as tf  # the engine TensorFlow users already run

        return tf.distribute.MirroredStrategy(devices)
    raise ValueError(
        f"distribute={mode!r} is not supported under the {backend} backend: "
        "Keras has no distribution API for PyTorch. Use JAX or TensorFlow, "
        "or wrap the model in torch's DistributedDataParallel in a custom "
        "training loop."
    )


def _configure_jax(mode, model_parallel, devices):
    if int(os.environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", "1")) > 1:
        keras.distribution.initialize()  # multi-host, from the environment
    devices = list(devices or keras.distribution.list_devices())
    if mode == "data":
        distribution = keras.distribution.DataParallel(devices=devices)
        replicas = len(devices)
    else:
        model_parallel = int(model_parallel)
        if model_parallel < 1 or len(devices) % model_parallel:
            raise ValueError(
                f"model_parallel={model_parallel} must divide the "
                f"{len(devices)} devices."
            )
        replicas = len(devices) // model_parallel
        mesh = keras.distribution.DeviceMesh(
            (replicas, model_parallel), ("batch", "model"), devices
        )
        distribution = keras.distribution.ModelParallel(
            layout_map=transformer_layout_map(mesh), batch_dim_name="batch"
        )
    keras.distribution.set_distribution(distribution)
    return _KerasDistribution(distribution, replicas)


def check_global_batch(batch_size, strategy):
    """Raises a clear error when `batch_size` cannot be split evenly over
    the strategy's data-parallel replicas."""
    replicas = strategy.num_replicas_in_sync
    if batch_size % replicas:
        raise ValueError(
            f"the batch size {batch_size} must be a multiple of the "
            f"{replicas} data-parallel replicas."
        )


def trim_to_replicas(arrays, strategy):
    """Drops the last few examples (fewer than the replicas) so that every
    batch, the last partial one included, splits evenly over the
    strategy's replicas, as Keras' JAX distribution requires. A no-op for
    one device and for TensorFlow's strategies (they split a ragged batch).

    Args:
        arrays: a tuple of arrays (or dicts/lists of arrays) with the same
            first dimension.
        strategy: what `configure` returned.

    Returns:
        `(arrays, dropped)`: the trimmed tuple and how many were dropped.
    """
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 or not getattr(strategy, "splits_batches_evenly", False):
        return tuple(arrays), 0
    count = len(keras.tree.flatten(arrays[0])[0])
    kept = count - count % replicas
    if kept == 0:
        raise ValueError(
            f"{count} examples cannot be split over {replicas} replicas."
        )
    return (
        tuple(keras.tree.map_structure(lambda a: a[:kept], a) for a in arrays),
        count - kept,
    )


def even_batches(dataset, strategy):
    """A `tf.data.Dataset` of batches whose sizes split evenly over the
    strategy's replicas: each batch loses its last `size % replicas`
    examples (fewer than the replicas; batches smaller than that are
    dropped). For pipelines whose batch sizes vary (the last batch, length
    buckets) under Keras' JAX distribution; unchanged otherwise.

    Args:
        dataset: a batched `tf.data.Dataset` (any structure of tensors with
            the batch first).
        strategy: what `configure` returned.
    """
    replicas = strategy.num_replicas_in_sync
    if replicas == 1 or not getattr(strategy, "splits_batches_evenly", False):
        return dataset
    import tensorflow as tf  # a tf.data pipeline, never a layer

    def size(*batch):
        return tf.shape(tf.nest.flatten(batch)[0])[0]

    def trim(*batch):
        kept = size(*batch) // replicas * replicas
        batch = tf.nest.map_structure(lambda t: t[:kept], batch)
        return batch if len(batch) > 1 else batch[0]

    return dataset.filter(lambda *b: size(*b) >= replicas).map(trim)

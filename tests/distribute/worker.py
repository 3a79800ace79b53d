"""Trains a small zoo Transformer classifier under `zoo.distribute` in its
own process and prints its per-step losses as JSON (see
test_distribute.py). Run as:

    python -m tests.distribute.worker MODE DEVICES [SAVE_PATH]

MODE is "none", "data" or "model"; DEVICES the simulated CPU devices to
use (the process must be started with that many: XLA_FLAGS on JAX)."""

import json
import sys


def simulate_tensorflow_devices(count):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count
    )


def main():
    mode, count = sys.argv[1], int(sys.argv[2])
    save_path = sys.argv[3] if len(sys.argv) > 3 else None
    import keras

    if keras.backend.backend() == "tensorflow" and count > 1:
        simulate_tensorflow_devices(count)
    import numpy as np

    from zoo import distribute
    from zoo.layers import PositionalEmbedding, TransformerEncoder

    devices = (
        keras.distribution.list_devices()[:count]
        if (keras.backend.backend() == "jax")
        else ([f"/cpu:{i}" for i in range(count)])
    )
    strategy = distribute.configure(
        None if mode == "none" else mode, devices=devices
    )
    batch = 8
    distribute.check_global_batch(batch, strategy)
    rng = np.random.default_rng(0)
    ids = rng.integers(1, 50, (64, 12)).astype("int32")
    ids[::3, 8:] = 0  # padding
    labels = (ids[:, 0] > 25).astype("float32")[:, None]
    keras.utils.set_random_seed(0)
    with strategy.scope():
        inputs = keras.Input((12,), dtype="int32")
        x = PositionalEmbedding(50, 12, 16, mask_zero=True, name="embeddings")(
            inputs
        )
        x = TransformerEncoder(4, 32, name="transformer_layer_0")(x)
        x = keras.layers.GlobalAveragePooling1D()(x)
        outputs = keras.layers.Dense(1, activation="sigmoid")(x)
        model = keras.Model(inputs, outputs)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5), loss="binary_crossentropy"
        )

    class Losses(keras.callbacks.Callback):
        values = []

        def on_train_batch_end(self, step, logs=None):
            self.values.append(float(logs["loss"]))

    model.fit(
        ids,
        labels,
        batch_size=batch,
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[Losses()],
    )
    result = {
        "losses": Losses.values,
        "replicas": strategy.num_replicas_in_sync,
        "prediction": model.predict(ids[:4], verbose=0).ravel().tolist(),
    }
    if mode == "model":
        kernel = model.get_layer("transformer_layer_0").weights[0]
        assert kernel.path.endswith("query/kernel"), kernel.path
        result["sharded"] = str(kernel.value.sharding.spec)
    if save_path:
        model.save(save_path)
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()

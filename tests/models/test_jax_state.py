"""zoo.models.jax_state: a backbone or task whose `fit`, `evaluate` or
`predict` raised keeps its weights (Keras' JAX trainer detaches them while
its loop runs and attached them again only when it ended)."""

import keras
import numpy as np
import pytest

from tests.helpers import to_numpy
from tests.models.test_portable import text_classifier
from zoo.models import GPTBackbone


def backbone():
    return GPTBackbone(
        20, num_layers=1, num_heads=2, hidden_dim=8, sequence_length=8
    )


def ids(length):
    return {
        "token_ids": np.ones((2, length), "int32"),
        "padding_mask": np.ones((2, length), "int32"),
    }


def test_a_predict_that_raised_leaves_the_weights_in_place():
    model = backbone()
    before = model.predict(ids(4), verbose=0)["sequence_output"]
    # Refused while the step is traced (TensorFlow, which traced the
    # first call's shapes, fails in its graph's slice instead).
    with pytest.raises(Exception, match="longer than|size"):
        model.predict(ids(12), verbose=0)
    after = model.predict(ids(4), verbose=0)["sequence_output"]
    np.testing.assert_array_equal(before, after)


class StopAfter(keras.callbacks.Callback):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def on_train_batch_end(self, batch, logs=None):
        if batch + 1 == self.steps:
            raise RuntimeError("interrupted")


def test_a_fit_that_raised_keeps_the_steps_it_finished():
    keras.utils.set_random_seed(0)
    task, x, y = text_classifier(dropout=0.0)
    task.compile(optimizer=keras.optimizers.SGD(0.5))
    initial = [to_numpy(w).copy() for w in task.backbone.weights]
    with pytest.raises(RuntimeError, match="interrupted"):
        task.fit(
            x,
            y,
            batch_size=1,
            epochs=1,
            shuffle=False,
            verbose=0,
            callbacks=[StopAfter(2)],
        )
    trained = [to_numpy(w) for w in task.backbone.weights]
    assert any(not np.array_equal(a, b) for a, b in zip(initial, trained))
    assert int(to_numpy(task.optimizer.iterations)) == 2
    # Still usable: it trains on and predicts.
    task.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert np.all(np.isfinite(task.predict(x, verbose=0)))

"""zoo.models.jax_state: a backbone or task whose `fit`, `evaluate` or
`predict` raised keeps its weights (Keras' JAX trainer detaches them while
its loop runs and attached them again only when it ended)."""

import keras
import numpy as np
import pytest

from tests.helpers import counted, to_numpy
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


def train_twice(model, method, keras_order):
    """The losses of two epochs (`fit`) or two steps (`train_on_batch`) on
    one batch; `keras_order`: through `keras.Model`'s own method, which
    under TensorFlow builds the optimizer inside the first trace."""
    x, y = ids(8), np.ones((2, 8), "int32")
    owner = keras.Model if keras_order else type(model)
    if method == "fit":
        return owner.fit(model, x, y, epochs=2, verbose=0).history["loss"]
    return [
        owner.train_on_batch(model, x, y, return_dict=True)["loss"]
        for _ in range(2)
    ]


@pytest.mark.parametrize("method", ["fit", "train_on_batch"])
def test_a_first_step_is_traced_once_with_the_optimizer_built(method):
    """Under TensorFlow the optimizer is built before `fit` or
    `train_on_batch` traces its step (otherwise its slots are created
    inside the first trace, and TensorFlow traces the step again); the
    training is the same."""
    from zoo.models import GPT

    losses = []
    for prebuilt in (True, False):
        keras.utils.set_random_seed(0)
        model = GPT(backbone(), preprocessor=None)
        model.compile(optimizer=keras.optimizers.AdamW(1e-2))
        traces = []
        model.train_step = counted(model.train_step, traces)
        losses.append(train_twice(model, method, keras_order=not prebuilt))
        if prebuilt:
            assert model.optimizer.built
            if keras.backend.backend() == "tensorflow":
                assert len(traces) == 1
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)


def test_an_unbuilt_preprocessor_does_not_hold_the_optimizer_back():
    """A task's preprocessor runs in the input pipeline, not in the step:
    fitting raw text still builds the optimizer first and traces once."""
    from zoo.data.tokenizers import CharacterTokenizer
    from zoo.models import GPT, GPTPreprocessor

    tokenizer = CharacterTokenizer.from_text("to be or not to be")
    model = GPT(
        GPTBackbone(
            tokenizer.vocabulary_size(),
            num_layers=1,
            num_heads=2,
            hidden_dim=8,
            sequence_length=8,
        ),
        preprocessor=GPTPreprocessor(tokenizer, 8),
    )
    model.compile(optimizer=keras.optimizers.AdamW(1e-2))
    assert not model.preprocessor.built  # what the check must look past
    traces = []
    model.train_step = counted(model.train_step, traces)
    history = model.fit(["to be or", "not to be"], epochs=2, verbose=0)
    assert model.optimizer.built
    assert np.all(np.isfinite(history.history["loss"]))
    if keras.backend.backend() == "tensorflow":
        assert len(traces) == 1


def test_a_model_with_an_unbuilt_layer_is_left_to_keras():
    class Lazy(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(1)

        def call(self, x):
            return self.dense(x)

    from zoo.models.jax_state import build_optimizer_before_tracing

    model = Lazy()
    model.compile(optimizer="sgd", loss="mse")
    build_optimizer_before_tracing(model)
    assert not model.optimizer.built  # its Dense has no variables yet
    model.fit(np.ones((4, 3)), np.ones((4, 1)), verbose=0)
    assert model.optimizer.built

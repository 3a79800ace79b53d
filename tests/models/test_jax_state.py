"""zoo.models.jax_state: a backbone or task whose `fit`, `evaluate` or
`predict` raised keeps its weights (Keras' JAX trainer detaches them while
its loop runs and attached them again only when it ended)."""

import keras
import numpy as np
import pytest

from tests.helpers import counted, tiny_text_gpt, to_numpy
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


def keras_order(patch):
    """Takes zoo's builds before the first trace away (inside a
    `monkeypatch.context()`): Keras' TensorFlow trainer then builds the
    optimizer and the compiled metrics inside the first trace."""
    from zoo.models import jax_state

    patch.setattr(jax_state, "build_optimizer_before_tracing", lambda m: None)
    patch.setattr(jax_state, "build_from_data_specs", lambda *a: False)


def run_twice(model, method):
    """The logs of two epochs (`fit`), two steps (`train_on_batch`) or two
    `evaluate` calls on one batch, through `keras.Model`'s own methods
    (what zoo adds must reach them too)."""
    x, y = ids(8), np.ones((2, 8), "int32")
    if method == "fit":
        return keras.Model.fit(model, x, y, epochs=2, verbose=0).history
    call = getattr(keras.Model, method)
    return [call(model, x, y, return_dict=True) for _ in range(2)]


@pytest.mark.parametrize(
    "method, metrics",
    [
        ("fit", "auto"),
        ("train_on_batch", "auto"),
        # A metric named by a string is made (its variables created) when
        # it first sees labels and predictions.
        ("fit", ["accuracy"]),
        ("evaluate", ["accuracy"]),
    ],
)
def test_a_first_step_is_traced_once_with_the_optimizer_built(
    method, metrics, monkeypatch
):
    """Under TensorFlow the optimizer and the compiled metrics are built
    before `fit`, `train_on_batch` or `evaluate` traces its step
    (otherwise they are created inside the first trace, and TensorFlow
    traces the step again); the results are the same."""
    from zoo.models import GPT

    results = []
    for zoo_builds in (True, False):
        with monkeypatch.context() as patch:
            if not zoo_builds:
                keras_order(patch)
            keras.utils.set_random_seed(0)
            model = GPT(backbone(), preprocessor=None)
            model.compile(
                optimizer=keras.optimizers.AdamW(1e-2),
                weighted_metrics=metrics,
            )
            step = "test_step" if method == "evaluate" else "train_step"
            traces = []
            setattr(model, step, counted(getattr(model, step), traces))
            results.append(run_twice(model, method))
        if keras.backend.backend() == "tensorflow":
            assert len(traces) == (1 if zoo_builds else 2)
    first, second = (keras.tree.flatten(r) for r in results)
    np.testing.assert_allclose(first, second, rtol=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="Keras' JAX and PyTorch trainers build the optimizer in evaluate",
)
def test_an_evaluation_builds_the_metrics_but_not_the_optimizer():
    """As Keras' TensorFlow trainer does: a layer frozen while the model
    is evaluated, then unfrozen, still trains."""
    from zoo.models import GPT

    model = GPT(backbone(), preprocessor=None)
    model.compile(weighted_metrics=["accuracy"])
    model.backbone.embeddings.trainable = False
    x, y = ids(8), np.ones((2, 8), "int32")
    model.evaluate(x, y, verbose=0)
    model.test_on_batch(x, y)
    assert model._compile_metrics.built and not model.optimizer.built
    model.backbone.embeddings.trainable = True
    history = model.fit(x, y, epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0])


def test_an_unbuilt_preprocessor_does_not_hold_the_optimizer_back():
    """A task's preprocessor runs in the input pipeline, not in the step:
    fitting raw text still builds the optimizer first and traces once."""
    model = tiny_text_gpt("to be or not to be")
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

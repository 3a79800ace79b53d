"""A model keeps its weights when `fit`, `evaluate` or `predict` raises
under JAX.

Keras' JAX trainer detaches the variables' values while its loop runs (it
passes them through the compiled step as one state and drops the copies the
variables hold, to save memory) and attaches the loop's state again only
when the loop ends. An error inside the loop, e.g. a zoo layer refusing a
sequence longer than its positions while the step is traced, would leave
every variable empty: the next call would fail with "'NoneType' object is
not callable", the weights gone. zoo's backbones and tasks mix in
`KeepsWeightsOnError`, which gives the variables back the last state the
loop reached (or the values they had) before the error goes on. Other
backends keep the variables attached; there it does nothing.

Under TensorFlow the same mixin builds the optimizer and the compiled
metrics before `fit`, `evaluate`, `train_on_batch` or `test_on_batch`
traces the first step (`build_from_data_specs`), as Keras' other trainers
do, so that TensorFlow traces the step once.
"""

import contextlib

import keras

from zoo.models.token_ids import ChecksTokenIds
from zoo.saving import KerasFilesOnly


class KeepsWeightsOnError(KerasFilesOnly, ChecksTokenIds):
    """Mixin for Keras models: after a `fit`, `evaluate` or `predict` that
    raises, the variables hold the last state the loop reached (JAX).

    Every zoo backbone, image encoder and task has it, so it also brings
    the checks every zoo model shares: `zoo.saving.KerasFilesOnly` (`save`
    writes `.keras` files only) and `zoo.models.token_ids.ChecksTokenIds`
    (token ids outside the vocabulary are one error line before `fit`,
    `evaluate`, `predict` or a call on NumPy arrays); and under
    TensorFlow the optimizer and the compiled metrics are built before
    the first step is traced (`build_from_data_specs`).

    Put it first among the bases: `class GPT(KeepsWeightsOnError, ...,
    keras_hub.models.CausalLM)`.
    """

    def fit(self, *args, **kwargs):
        with _ReattachOnError(self):
            return super().fit(*args, **kwargs)

    def evaluate(self, *args, **kwargs):
        with _ReattachOnError(self), _evaluation(self):
            return super().evaluate(*args, **kwargs)

    def test_on_batch(self, *args, **kwargs):
        with _evaluation(self):
            return super().test_on_batch(*args, **kwargs)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        # Keras' TensorFlow trainer calls this before tracing a step in
        # `fit`, `evaluate`, `train_on_batch` and `test_on_batch`, also
        # when called as `keras.Model.fit(model, ...)`.
        if not build_from_data_specs(self, iterator, data_batch):
            super()._maybe_symbolic_build(
                iterator=iterator, data_batch=data_batch
            )

    def predict(self, *args, **kwargs):
        with _ReattachOnError(self):
            return super().predict(*args, **kwargs)

    def _purge_model_variables(
        self,
        trainable_variables=False,
        non_trainable_variables=False,
        optimizer_variables=False,
        metrics_variables=False,
    ):
        # Keras' JAX trainer only: remember what it detaches.
        groups = []
        if trainable_variables:
            groups += self.trainable_variables
        if non_trainable_variables:
            groups += self.non_trainable_variables
        if optimizer_variables and getattr(self, "optimizer", None):
            groups += self.optimizer.variables
        if metrics_variables:
            groups += self.metrics_variables
        detached = getattr(self, "_detached_values", None)
        if detached is not None:
            detached.extend(
                (v, v._value) for v in groups if v._value is not None
            )
        return super()._purge_model_variables(
            trainable_variables=trainable_variables,
            non_trainable_variables=non_trainable_variables,
            optimizer_variables=optimizer_variables,
            metrics_variables=metrics_variables,
        )


def build_optimizer_before_tracing(model):
    """Under TensorFlow, builds `model`'s optimizer for its trainable
    variables before `fit` or `train_on_batch` traces its first step, when
    every layer is built and the optimizer is not.

    Keras' TensorFlow trainer (without a distribution strategy) leaves the
    optimizer to be built inside the first traced step, and a
    `tf.function` that creates variables is traced a second time: twice
    the tracing of every first `fit` (seconds for a Transformer's
    optimizer). Keras' JAX and PyTorch trainers, and its TensorFlow
    trainer under a strategy, build the optimizer before the first step,
    as here. A model with an unbuilt layer (whose variables its first call
    will create) is left to Keras; a task's preprocessor, which runs in
    the input pipeline, does not count.

    Args:
        model: a compiled Keras model.
    """
    if keras.backend.backend() != "tensorflow":
        return
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built:
        return
    # A task's preprocessor runs in the input pipeline, never inside the
    # step, so it creates no variable there whether or not it is built.
    preprocessor = getattr(model, "preprocessor", None)
    outside = (
        {id(layer) for layer in preprocessor._flatten_layers()}
        if isinstance(preprocessor, keras.layers.Layer)
        else set()
    )
    layers = [
        layer for layer in model._flatten_layers() if id(layer) not in outside
    ]
    if not all(layer.built for layer in layers):
        return
    variables = model.trainable_variables
    if variables:
        optimizer.build(variables)


def build_from_data_specs(model, iterator=None, data_batch=None):
    """Under TensorFlow without a distribution strategy, builds what
    `model`'s first traced step would otherwise create before `fit`,
    `evaluate`, `train_on_batch` or `test_on_batch` traces it: the
    compiled metrics' and loss' variables, from the data's specs (the
    part of Keras' symbolic build, which its TensorFlow trainer runs only
    under a strategy and its JAX and PyTorch trainers always), and, for
    training, the optimizer's (`build_optimizer_before_tracing`). The
    mixin's `evaluate` and `test_on_batch` leave the optimizer unbuilt, as
    Keras' TensorFlow trainer does (`keras.Model.evaluate(model, ...)`
    called directly builds it, as Keras' JAX and PyTorch trainers do).

    A `tf.function` that creates variables is traced a second time, so
    without this a classifier's first `fit` (its "accuracy" metric made
    inside the first trace) or first `evaluate` traces its step twice.
    No batch is read: the specs come from the epoch iterator's dataset
    (or the batch `train_on_batch` was given). Ragged or sparse data, or
    a model whose outputs cannot be worked out symbolically, leave the
    metrics to Keras (built inside the first trace, as before).

    Args:
        model: a compiled Keras model.
        iterator: Keras' epoch iterator of the `fit` or `evaluate` call.
        data_batch: a batch (or its specs), when the caller has one.

    Returns:
        False where Keras' own `_maybe_symbolic_build` should run instead
        (other backends, a distribution strategy's scope, or metrics that
        could not be built here).
    """
    if keras.backend.backend() != "tensorflow":
        return False
    strategy = getattr(model, "distribute_strategy", None)
    if type(strategy).__name__ != "_DefaultDistributionStrategy":
        return False  # inside a strategy's scope: Keras builds it all
    metrics, loss = model._compile_metrics, model._compile_loss
    metrics_unbuilt = metrics is not None and not metrics.built
    loss_unbuilt = loss is not None and not loss.built
    if metrics_unbuilt or loss_unbuilt:
        if data_batch is None:
            dataset = getattr(iterator, "_distributed_dataset", None)
            data_batch = getattr(dataset, "element_spec", None)
        if data_batch is None or not all(
            _plain(leaf) for leaf in keras.tree.flatten(data_batch)
        ):
            return False
        try:
            _build_compiled(model, data_batch, metrics_unbuilt, loss_unbuilt)
        except Exception:
            return False  # the first trace builds them, or says what is wrong
    if not getattr(model, "_evaluating", False):
        build_optimizer_before_tracing(model)
    return True


def _plain(leaf):
    """Whether a data leaf is a dense array or tensor spec (or absent)."""
    name = type(leaf).__name__
    return leaf is None or (
        hasattr(leaf, "shape")
        and hasattr(leaf, "dtype")
        and "Ragged" not in name
        and "Sparse" not in name
    )


def _build_compiled(model, data_batch, metrics_unbuilt, loss_unbuilt):
    """Keras' symbolic build of the compiled metrics and loss
    (`Trainer._symbolic_build`), without the optimizer."""
    from keras.src.backend import compute_output_spec

    def symbolic(leaf):
        if leaf is None:
            return None
        return keras.KerasTensor(
            tuple(leaf.shape), keras.backend.standardize_dtype(leaf.dtype)
        )

    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(
        keras.tree.map_structure(symbolic, data_batch)
    )
    y_pred = compute_output_spec(model, x, training=False)
    if metrics_unbuilt:
        compute_output_spec(
            model.compute_metrics, x, y, y_pred, sample_weight=sample_weight
        )
    if loss_unbuilt:
        compute_output_spec(
            model._compute_loss,
            x,
            y,
            y_pred,
            sample_weight=sample_weight,
            training=False,
        )


@contextlib.contextmanager
def _evaluation(model):
    """Marks `model` as evaluating while the block runs: the builds before
    the first trace leave its optimizer unbuilt."""
    outer = getattr(model, "_evaluating", False)
    object.__setattr__(model, "_evaluating", True)
    try:
        yield
    finally:
        object.__setattr__(model, "_evaluating", outer)


class _ReattachOnError:
    """Records the values Keras detaches during the block; if the block
    raises, attaches the loop's last state, then those values wherever a
    variable is still empty."""

    def __init__(self, model):
        self.model = model
        self.outer = None

    def __enter__(self):
        if keras.backend.backend() == "jax":
            self.outer = getattr(self.model, "_detached_values", None)
            if self.outer is None:  # not inside another fit's evaluate
                _set(self.model, [])

    def __exit__(self, kind, error, traceback):
        model = self.model
        if keras.backend.backend() != "jax" or self.outer is not None:
            return False
        detached = model._detached_values
        _set(model, None)
        if kind is None:
            return False
        try:
            model.jax_state_sync()  # the state of the last finished step
        except Exception:
            pass
        for variable, value in detached:
            if variable._value is None:
                variable._value = value
        model._jax_state = None
        model._jax_state_synced = True
        return False


def _set(model, values):
    # Past Keras' attribute tracking: a list of (variable, value) pairs set
    # the usual way would be tracked as the model's own state.
    object.__setattr__(model, "_detached_values", values)

"""Token ids checked before a model reads them: an id outside the
vocabulary is one ValueError line naming the id and the vocabulary's size,
the same on every backend, never a NaN.

An embedding lookup past its table gives NaN or garbage rows under JAX
without a word, a long error of TensorFlow's own, or PyTorch's
`IndexError`. The embedding layers check the ids whose values they can see
(`zoo.layers.checks.check_token_ids`: eager calls, and every call under
PyTorch), but inside `predict`, `fit` and `evaluate` under JAX and
TensorFlow the ids are traced and have no value yet. `ChecksTokenIds`,
which every zoo backbone and task has (through
`zoo.models.jax_state.KeepsWeightsOnError`), reads them on the host before
those calls start:

* `fit`, `evaluate`, `predict` (with `validation_data`) and
  `train_on_batch`, `test_on_batch`, `predict_on_batch`: the id inputs of
  `x` when they have values (NumPy arrays, lists, eager tensors): a
  dict's `token_ids`, `encoder_token_ids` and `decoder_token_ids` against
  the backbone's `vocabulary_size`, `segment_ids` against its
  `num_segments`, and a bare array for a model whose one input is
  `token_ids`. Datasets and generators are not read.
* calling a model on NumPy arrays or lists (`backbone(ids)`): checked the
  same way before Keras runs it, so the error is one line rather than
  Keras' report around the embedding layer's. Tensors are left to the
  embedding layers; symbolic and traced inputs have no values, so
  compiled functions, `jit` and exports trace exactly as before.
* a task that has a preprocessor, given token ids (a dict with one of the
  keys above) to `fit`, `evaluate` or `predict`: one TypeError line, since
  its preprocessor reads raw input (keras-hub would fail deep in
  `tf.data`). `*_on_batch` take model inputs as they are.

Inside your own compiled code (a `jax.jit`, a `tf.function`) ids are
still not checked.
"""

import keras
import numpy as np

from zoo.layers.checks import check_token_ids

# Model input name -> (what an id is called, the backbone attribute that
# bounds it).
ID_INPUTS = {
    "token_ids": ("token id", "vocabulary_size"),
    "encoder_token_ids": ("encoder token id", "vocabulary_size"),
    "decoder_token_ids": ("decoder token id", "vocabulary_size"),
    "segment_ids": ("segment id", "num_segments"),
}


def id_limits(model):
    """`{input name: (what, bound's name, bound)}` for the id inputs of a
    functional zoo model (a backbone, or a task, bounded by its
    backbone); empty when it has none (ViT, the image encoders)."""
    backbone = getattr(model, "backbone", model)
    limits = {}
    for tensor in getattr(model, "inputs", None) or ():
        name = getattr(tensor, "name", None)
        if name in ID_INPUTS:
            what, attribute = ID_INPUTS[name]
            bound = getattr(backbone, attribute, None)
            if bound is not None:
                limits[name] = (what, attribute, int(bound))
    return limits


def check_input_ids(model, x, label, host_only=False):
    """Raises one ValueError line when an id input of `x` (as `model`
    takes it: a dict, or one array for a model whose one input is
    `token_ids`) holds an id outside `[0, bound)`; `label` starts the
    message (e.g. "GPTBackbone.predict()").

    Values are read from NumPy arrays and lists, and, unless `host_only`,
    from eager tensors (a device-to-host copy); anything else (a dataset,
    a symbolic or traced tensor) passes unchecked.

    Example:

    >>> from zoo.models.gpt import GPTBackbone
    >>> backbone = GPTBackbone.from_preset("smoke", vocabulary_size=20)
    >>> ids = np.array([[1, 2, 25]])
    >>> check_input_ids(backbone, {"token_ids": ids}, "predict()")
    Traceback (most recent call last):
      ...
    ValueError: predict(): token id 25 is outside [0, vocabulary_size=20).
    """
    limits = id_limits(model)
    if not limits:
        return
    if isinstance(x, dict):
        items = [(name, x[name]) for name in limits if name in x]
    elif len(limits) == 1 and len(model.inputs) == 1:
        items = [(next(iter(limits)), x)]
    else:
        return
    for name, value in items:
        if isinstance(value, (list, tuple)):
            try:
                value = np.asarray(value)
            except ValueError:  # ragged lists: Keras says so itself
                continue
        if isinstance(value, np.ndarray):
            if value.dtype.kind not in "biuf":
                continue
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                raise ValueError(
                    f"{label}: {name} holds NaN or infinite values; token "
                    "ids are whole numbers."
                )
        elif host_only or not keras.ops.is_tensor(value):
            continue
        what, bound_name, bound = limits[name]
        check_token_ids(value, bound, label, what, bound_name)


def refuse_ids_for_preprocessor(model, x, label):
    """One TypeError line when `x` is a dict of token ids but `model` (a
    task) has a preprocessor, which makes ids from raw input itself."""
    if getattr(model, "preprocessor", None) is None or not isinstance(x, dict):
        return
    keys = sorted(key for key in x if key in ID_INPUTS)
    if keys:
        raise TypeError(
            f"{label} got token ids ({', '.join(keys)}), but this "
            f"{type(model).__name__} has a preprocessor that makes them from "
            "raw input: pass raw input, or set task.preprocessor = None to "
            "feed ids."
        )


def _validation_x(kwargs):
    validation = kwargs.get("validation_data")
    if isinstance(validation, (tuple, list)) and validation:
        return validation[0]
    return None


class ChecksTokenIds:
    """Mixin for zoo's functional models: the id inputs of `fit`,
    `evaluate`, `predict` and the `*_on_batch` methods, and of a call on
    NumPy arrays, are checked against the vocabulary first
    (`check_input_ids`); a task with a preprocessor refuses token ids in
    `fit`, `evaluate` and `predict` (`refuse_ids_for_preprocessor`).

    Every zoo backbone and task has it through
    `zoo.models.jax_state.KeepsWeightsOnError`.
    """

    def _check_ids(self, x, method, raw=True):
        label = f"{type(self).__name__}.{method}()"
        if raw:
            refuse_ids_for_preprocessor(self, x, label)
        check_input_ids(self, x, label)

    def fit(self, x=None, *args, **kwargs):
        self._check_ids(x, "fit")
        self._check_ids(_validation_x(kwargs), "fit")
        return super().fit(x, *args, **kwargs)

    def evaluate(self, x=None, *args, **kwargs):
        # Keras' own `fit` evaluates its validation data through here
        # (`_use_cached_eval_dataset`), as model inputs: `keras.Model.fit`
        # on token ids, which fit() checked, is not refused.
        if not kwargs.get("_use_cached_eval_dataset"):
            self._check_ids(x, "evaluate")
        return super().evaluate(x, *args, **kwargs)

    def predict(self, x, *args, **kwargs):
        self._check_ids(x, "predict")
        return super().predict(x, *args, **kwargs)

    def train_on_batch(self, x, *args, **kwargs):
        self._check_ids(x, "train_on_batch", raw=False)
        return super().train_on_batch(x, *args, **kwargs)

    def test_on_batch(self, x, *args, **kwargs):
        self._check_ids(x, "test_on_batch", raw=False)
        return super().test_on_batch(x, *args, **kwargs)

    def predict_on_batch(self, x, *args, **kwargs):
        self._check_ids(x, "predict_on_batch", raw=False)
        return super().predict_on_batch(x, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        inputs = args[0] if args else kwargs.get("inputs")
        if isinstance(inputs, (dict, np.ndarray, list)):
            check_input_ids(
                self, inputs, f"{type(self).__name__}(...)", host_only=True
            )
        return super().__call__(*args, **kwargs)

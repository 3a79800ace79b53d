"""Class labels checked before a classifier trains or is evaluated, as
scikit-learn's estimator checks do: labels outside the classes (2 or 5 for
a binary model), NaN, strings, or a label count that differs from the
example count are one clear line before the first step, never a loss that
trains on garbage (a binary cross-entropy on the label 5 is negative) or a
NaN.

`ClassLabelsMixin` is what the classifier tasks (`TextClassifier`,
`BertTextClassifier`, `ViTImageClassifier`) mix in; `check_class_labels`
and `check_dataset_labels` are the checks themselves.

What is checked:

* arrays and lists of labels (NumPy, Python, a backend's tensors): every
  value, their shape and their count against the examples' (and
  `sample_weight`'s);
* `validation_data=(x, labels)` the same way;
* a `tf.data.Dataset`, without consuming it: only its `element_spec`. A
  dataset with no labels, or string labels, is refused; the values
  themselves (a 5 for a binary model, a NaN) cannot be seen without
  reading the data and are not checked. Build datasets from checked
  arrays (`zoo.data.text.text_dataset`), or check the labels with
  `check_class_labels` before building them.

A `keras.utils.PyDataset` of preprocessed batches passes unchecked.
"""

import numbers

import keras
import numpy as np

from zoo._tensorflow import is_dataset


def _classes(num_classes):
    """The labels a classifier takes, in words."""
    if num_classes == 1:
        return (
            "0 or 1, or a probability between them, for this binary classifier"
        )
    return (
        f"class ids 0..{num_classes - 1} for this {num_classes}-class "
        "classifier"
    )


def _call(method):
    """`fit()` for "fit"; a method that names its argument as it is."""
    return method if "(" in method else f"{method}()"


def _shown(value):
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0:
        value = value.item()
    text = repr(value)
    return text if len(text) <= 30 else text[:27] + "..."


def example_count(x):
    """How many examples `x` holds, or None when that is not known
    without reading it (a dataset, a generator).

    A lone string is one example; a dict counts its first entry; a pair of
    lists of strings (a pair classifier's two segments) counts one of them
    when they are equally long, and is not known otherwise (the text
    checks then name the mismatch).
    """
    if x is None or is_dataset(x) or isinstance(x, keras.utils.PyDataset):
        return None
    if isinstance(x, (str, bytes)):
        return 1
    if isinstance(x, dict):
        return example_count(next(iter(x.values()))) if x else None
    if (
        isinstance(x, tuple)
        and len(x) == 2
        and all(isinstance(s, (list, tuple, np.ndarray)) for s in x)
        and len(x[0])
        and all(isinstance(t, (str, bytes)) for t in np.ravel(x[0])[:1])
    ):
        return len(x[0]) if len(x[0]) == len(x[1]) else None
    shape = getattr(x, "shape", None)
    if shape is not None:
        if len(shape) == 0:
            return 1
        return None if shape[0] is None else int(shape[0])
    try:
        return len(x)
    except TypeError:
        return None


def _as_array(y, method, what):
    if keras.ops.is_tensor(y):
        y = keras.ops.convert_to_numpy(y)
    if isinstance(y, (str, bytes)):
        raise TypeError(
            f"{_call(method)} got the string {_shown(y)} as {what}: pass one "
            "number per example."
        )
    try:
        return np.asarray(y)
    except ValueError:  # ragged nested lists
        raise ValueError(
            f"{_call(method)} got ragged {what} (lists of different lengths): "
            "pass one number per example."
        ) from None


def _first_non_number(labels):
    """`(index, value)` of the first label that is not a real number (a
    bool counts as one), or None."""
    for index, row in enumerate(labels.reshape(len(labels), -1)):
        for item in row.tolist():
            if not isinstance(item, numbers.Real):
                return index, item
    return None


def check_class_labels(
    y,
    num_classes,
    method="fit",
    count=None,
    what="labels",
    probabilities=True,
):
    """Raises, in one line, unless `y` holds one valid label per example
    for a classifier of `num_classes` classes.

    Valid labels: for a binary classifier (`num_classes=1`, a sigmoid
    output), numbers in [0, 1] (0 and 1, or soft labels between), `(n,)`
    or `(n, 1)`; for `num_classes` > 1, whole-number class ids in
    `[0, num_classes)`, `(n,)` or `(n, 1)`, or class probabilities (one-hot
    rows) `(n, num_classes)` in [0, 1] where `probabilities` allows them.
    Bools count as 0 and 1.

    Args:
        y: the labels: a list, a NumPy array or a backend tensor.
        num_classes: the classifier's `num_classes` (1: binary).
        method: the call, for the message ("fit", "evaluate").
        count: how many examples there are (None: not checked).
        what: what the labels are called in the message.
        probabilities: whether `(n, num_classes)` rows of class
            probabilities are labels too (False for a sparse loss, which
            reads class ids only).

    Returns:
        `y`, unchanged.

    Raises:
        TypeError: labels that are strings (or other non-numbers).
        ValueError: no labels, a count that differs from `count`, a shape
            that is not one label per example, NaN or infinite labels,
            labels outside the classes or, for several classes, not whole
            numbers.

    Example:

    >>> check_class_labels([0, 1, 5, 2], num_classes=1)
    Traceback (most recent call last):
      ...
    ValueError: fit(): label 5 at index 2 is outside the classes: labels \
are 0 or 1, or a probability between them, for this binary classifier (2 \
of 4 labels are outside).
    """
    if y is None:
        raise ValueError(
            f"{_call(method)} needs {what}: {method.split('(')[0]}(x, "
            f"{what}), one per example "
            f"({_classes(num_classes)})."
        )
    labels = _as_array(y, method, what)
    if labels.ndim == 0:
        raise ValueError(
            f"{_call(method)} got one {_shown(labels)} as {what}: pass one per "
            "example (a list or an array)."
        )
    if labels.dtype.kind not in "biuf":
        found = _first_non_number(labels)
        if found is not None:
            index, value = found
            hint = (
                " (map names to ids first, e.g. {'neg': 0, 'pos': 1})"
                if isinstance(value, (str, bytes))
                else ""
            )
            raise TypeError(
                f"{_call(method)}: label {_shown(value)} at index {index} is a "
                f"{type(value).__name__}, not a number: {what} are "
                f"{_classes(num_classes)}{hint}."
            )
        labels = labels.astype("float64")
    if count is not None and len(labels) != count:
        raise ValueError(
            f"{_call(method)} got {count} examples but {len(labels)} {what}: one "
            "label per example."
        )
    if len(labels) == 0:
        return y
    width = labels.shape[1] if labels.ndim == 2 else None
    one_hot = num_classes > 1 and width == num_classes and labels.ndim == 2
    if one_hot and not probabilities:
        raise ValueError(
            f"{_call(method)} got {what} of shape {labels.shape}, rows of "
            "class probabilities, but this classifier's loss reads class ids "
            f"(n,): pass {what}.argmax(-1), or compile with "
            'loss="categorical_crossentropy".'
        )
    if not (labels.ndim == 1 or width == 1 or one_hot):
        expected = "(n,) or (n, 1)" + (
            f" class ids, or (n, {num_classes}) class probabilities"
            if num_classes > 1 and probabilities
            else ""
        )
        raise ValueError(
            f"{_call(method)} got {what} of shape {labels.shape}; this "
            f"classifier takes {expected}: {_classes(num_classes)}."
        )
    flat = labels.reshape(len(labels), -1)
    values = flat.astype("float64")
    classes = _classes(num_classes)
    _refuse(
        ~np.isfinite(values),
        flat,
        method,
        lambda count: (
            f"not a number: {what} are {classes} ({count} of "
            f"{len(labels)} are NaN or infinite)."
        ),
    )
    if num_classes == 1 or one_hot:
        outside = (values < 0) | (values > 1)
    else:
        outside = (values < 0) | (values >= num_classes)
    _refuse(
        outside,
        flat,
        method,
        lambda count: (
            f"outside the classes: {what} are {classes} ({count} "
            f"of {len(labels)} {what} are outside)."
        ),
    )
    if num_classes > 1 and not one_hot:
        _refuse(
            values != np.round(values),
            flat,
            method,
            lambda count: f"not a whole number: {what} are {classes}.",
        )
    return y


def _refuse(bad, flat, method, problem):
    """One ValueError line naming the first label where `bad` (a boolean
    array shaped as `flat`, one row per example) holds, if any: "fit():
    label <value> at index <row> is <problem(count)>", `count` being how
    many examples have such a label."""
    if not bad.any():
        return
    index = int(np.argwhere(bad)[0][0])
    raise ValueError(
        f"{_call(method)}: label {_shown(flat[bad][0])} at index {index} is "
        f"{problem(int(bad.any(1).sum()))}"
    )


def check_dataset_labels(
    dataset, num_classes, method="fit", probabilities=True
):
    """The checks a `tf.data.Dataset`'s `element_spec` allows, without
    reading an element: it must yield `(x, labels)` or `(x, labels,
    sample_weight)`, with numeric labels of a shape one label per example
    can have. Label values are not checked (that would consume the
    dataset).

    Raises:
        TypeError: string labels.
        ValueError: elements without labels, labels of a shape that is not
            one label per example.
    """
    spec = dataset.element_spec
    if not isinstance(spec, tuple) or len(spec) not in (2, 3):
        raise ValueError(
            f"{_call(method)} got a dataset without labels: its elements must "
            f"be (x, labels) pairs, labels {_classes(num_classes)}."
        )
    labels = spec[1]
    dtype = getattr(labels, "dtype", None)
    if dtype is None:
        raise ValueError(
            f"{_call(method)} got a dataset whose labels are a "
            f"{type(labels).__name__}: they must be one tensor, one number "
            "per example."
        )
    if dtype.name == "string":
        raise TypeError(
            f"{_call(method)} got a dataset of string labels: labels are "
            f"{_classes(num_classes)} (map names to ids first, e.g. with "
            "dataset.map)."
        )
    shape = labels.shape
    rank = shape.rank
    if rank is None:
        return dataset
    width = shape[-1] if rank == 2 else None
    if rank == 2 and num_classes > 1 and width == num_classes:
        if not probabilities:
            raise ValueError(
                f"{_call(method)} got a dataset whose label batches have "
                f"shape {tuple(shape)}, rows of class probabilities, but "
                "this classifier's loss reads class ids (batch,): map them "
                "to their argmax, or compile with "
                'loss="categorical_crossentropy".'
            )
        return dataset
    if rank not in (1, 2) or width not in (None, 1):
        raise ValueError(
            f"{_call(method)} got a dataset whose label batches have shape "
            f"{tuple(shape)}; this classifier takes (batch,) or (batch, 1)"
            + (
                f" class ids, or (batch, {num_classes}) probabilities"
                if num_classes > 1 and probabilities
                else ""
            )
            + f": {_classes(num_classes)}."
        )
    return dataset


class ClassLabelsMixin:
    """Mixin for classifier tasks (with a `num_classes` attribute; 1 means
    binary): `fit` and `evaluate` check the labels, those of
    `validation_data` and the count of `sample_weight` (arrays: every
    value; datasets: their `element_spec`) before anything runs, so a bad
    label is one clear line (`check_class_labels`).

    Put it first among the bases: `class TextClassifier(ClassLabelsMixin,
    ..., keras_hub.models.Task)`.
    """

    def _reads_probabilities(self):
        """Whether the compiled loss takes rows of class probabilities (not
        a sparse loss, which reads class ids)."""
        loss = getattr(self, "loss", None)
        if loss is None:
            return True
        name = loss if isinstance(loss, str) else type(loss).__name__
        name = getattr(loss, "__name__", name)
        return "sparse" not in name.lower()

    def _check_labels(self, x, y, sample_weight, method):
        if isinstance(x, keras.utils.PyDataset):
            return
        probabilities = self._reads_probabilities()
        if is_dataset(x):
            if y is None:
                check_dataset_labels(x, self.num_classes, method, probabilities)
            return
        count = example_count(x)
        check_class_labels(
            y, self.num_classes, method, count, probabilities=probabilities
        )
        if sample_weight is not None and count is not None:
            weights = _as_array(sample_weight, method, "sample weights")
            weighted = len(weights) if weights.ndim else 1
            if weighted != count:
                raise ValueError(
                    f"{_call(method)} got {count} examples but {weighted} sample "
                    "weights: one weight per example."
                )

    def fit(self, x=None, y=None, *args, **kwargs):
        self._check_labels(x, y, kwargs.get("sample_weight"), "fit")
        validation = kwargs.get("validation_data")
        if isinstance(validation, (tuple, list)) and validation:
            x_val, y_val = (
                validation[0],
                (validation[1] if len(validation) > 1 else None),
            )
            self._check_labels(
                x_val,
                y_val,
                validation[2] if len(validation) > 2 else None,
                "fit(validation_data=...)",
            )
        elif is_dataset(validation):
            check_dataset_labels(
                validation,
                self.num_classes,
                "fit(validation_data=...)",
                self._reads_probabilities(),
            )
        return super().fit(x, y, *args, **kwargs)

    def evaluate(self, x=None, y=None, *args, **kwargs):
        self._check_labels(x, y, kwargs.get("sample_weight"), "evaluate")
        return super().evaluate(x, y, *args, **kwargs)

"""Unknown keyword arguments to a backbone or task are an error.

Keras' functional `Model` ignores keyword arguments it does not know, so
`ViTBackbone(image_shape=(32, 32, 1))` (for `image_size`) would build the
default 28 x 28 model without a word. The zoo's backbones and tasks pass
what they do not take themselves through `check_model_kwargs` first
(`from_preset` checks its overrides before that, `zoo.models.presets`).

Numeric arguments of the tasks' methods (a sampler's `k`, `p` and
`temperature`, a generation's `max_length`) go through `check_integer` and
`check_number`, which refuse a bad value in one line naming the argument,
the value and what is accepted, the same way on every backend.
"""

import inspect
import math
import numbers

import keras_hub
import numpy as np

# What keras-hub's `Backbone`/`Task` and `keras.Model` take, and what their
# `get_config` writes into a saved file; a `Task` also takes `compile`.
MODEL_KWARGS = ("name", "trainable", "dtype")


def check_model_kwargs(model, kwargs):
    """Raises a TypeError naming every key of `kwargs` that neither
    `type(model).__init__` nor `keras.Model` takes, with the arguments it
    does take.

    Example:

    >>> from zoo.models.vit import ViTBackbone
    >>> ViTBackbone(image_size=(28, 28), patch=4)
    Traceback (most recent call last):
      ...
    TypeError: ViTBackbone got an unexpected keyword argument 'patch'; ...
    """
    known = MODEL_KWARGS + (
        ("compile",) if isinstance(model, keras_hub.models.Task) else ()
    )
    unknown = [key for key in kwargs if key not in known]
    if not unknown:
        return
    cls = type(model)
    taken = [
        name
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    taken += [name for name in known if name not in taken]
    which = (
        "an unexpected keyword argument"
        if len(unknown) == 1
        else "unexpected keyword arguments"
    )
    raise TypeError(
        f"{cls.__name__} got {which} "
        f"{', '.join(repr(k) for k in unknown)}; it takes "
        f"{', '.join(taken)}."
    )


def check_preprocessor_fits(task, positions, argument):
    """Raises a ValueError, when the task is built, if its preprocessor
    packs more tokens than its backbone has positions (training or
    prediction would fail later, on the first batch).

    Args:
        task: the task being built, with `preprocessor` set (or None).
        positions: the backbone's number of positions.
        argument: the backbone argument that sets them, for the message
            (e.g. "max_sequence_length").
    """
    length = getattr(task.preprocessor, "sequence_length", None)
    if length is None or positions is None or length <= positions:
        return
    raise ValueError(
        f"{type(task).__name__}: the preprocessor packs {length} tokens but "
        f"the backbone has {positions} positions. Build the backbone with "
        f"{argument}={length} or more (from_preset(..., backbone_{argument}="
        f"{length})), or the preprocessor with sequence_length={positions} "
        "or less."
    )


def check_vocabulary_fits(task, vocabulary_size):
    """Raises a ValueError, when the task is built, if its preprocessor's
    tokenizer makes ids the backbone has no embedding for (a gather past
    the table gives NaN under JAX inside `fit`, where no id is visible to
    check).

    Args:
        task: the task being built, with `preprocessor` set (or None): its
            tokenizer's `vocabulary_size()`, or the preprocessor's own
            `vocabulary_size` (the text classifier's), is checked.
        vocabulary_size: the backbone's number of token ids.
    """
    preprocessor = task.preprocessor
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if preprocessor is None or vocabulary_size is None:
        return
    try:
        size = int(
            tokenizer.vocabulary_size()
            if tokenizer is not None
            else preprocessor.vocabulary_size
        )
    except (ValueError, TypeError, AttributeError):
        return  # loading: the vocabulary comes from the file's assets next
    if size <= int(vocabulary_size):
        return
    source = "preprocessor" if tokenizer is None else "tokenizer"
    raise ValueError(
        f"{type(task).__name__}: the {source} has {size} tokens but the "
        f"backbone embeds {vocabulary_size}. Build the backbone with "
        f"vocabulary_size={size} (or more)."
    )


def shown(value, limit=40):
    """`value` as an error message quotes it: `repr` for strings, a float
    in at most 12 significant digits (`1e+12`), `str` otherwise (a NumPy
    scalar reads `nan`, not `np.float64(nan)`), cut to `limit`
    characters."""
    if isinstance(value, (str, bytes)):
        text = repr(value)
    elif isinstance(value, float) or isinstance(value, np.floating):
        text = format(float(value), ".12g")
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_integer(name, value, low, high=None, meaning=""):
    """`value` as an `int`, or one ValueError line naming `name`, the value
    and what is accepted: an integer (an integral float such as `5.0`
    counts; a bool, a string, NaN or `2.5` does not) in `[low, high]`
    (`high` None: no upper bound).

    Args:
        name: the argument, for the message.
        value: what was given.
        low, high: the accepted bounds, both included.
        meaning: what the argument is or what sets its bound, appended to
            the message in parentheses (e.g. "the decoder's sequence
            length").

    Example:

    >>> check_integer("k", 3.0, 1)
    3
    >>> check_integer("k", 0, 1, meaning="tokens drawn from")
    Traceback (most recent call last):
      ...
    ValueError: k must be an integer >= 1 (tokens drawn from); got 0.
    """
    integral = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real)
        and math.isfinite(float(value))
        and float(value).is_integer()
    )
    if integral and not isinstance(value, (bool, np.bool_)):
        number = int(value)
        if number >= low and (high is None or number <= high):
            return number
    accepted = f">= {low}" if high is None else f"in [{low}, {high}]"
    about = f" ({meaning})" if meaning else ""
    raise ValueError(
        f"{name} must be an integer {accepted}{about}; got {shown(value)}."
    )


def check_number(
    name, value, low, high=None, low_open=False, meaning="", hint=""
):
    """`value` as a `float`, or one ValueError line naming `name`, the value
    and what is accepted: a finite real number (not a bool or a string)
    from `low` (excluded when `low_open`) to `high` (included; None: no
    upper bound). `hint` is appended to the message as a sentence.

    Example:

    >>> check_number("p", 1.5, 0, 1, low_open=True)
    Traceback (most recent call last):
      ...
    ValueError: p must be a number in (0, 1]; got 1.5.
    """
    if isinstance(value, numbers.Real) and not isinstance(
        value, (bool, np.bool_)
    ):
        number = float(value)
        above = number > low if low_open else number >= low
        if math.isfinite(number) and above and (high is None or number <= high):
            return number
    if high is None:
        accepted = f"a finite number {'>' if low_open else '>='} {low}"
    else:
        accepted = f"a number in {'(' if low_open else '['}{low}, {high}]"
    about = f" ({meaning})" if meaning else ""
    more = f" {hint}" if hint else ""
    raise ValueError(
        f"{name} must be {accepted}{about}; got {shown(value)}.{more}"
    )

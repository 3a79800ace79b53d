"""Unknown keyword arguments to a backbone or task are an error.

Keras' functional `Model` ignores keyword arguments it does not know, so
`ViTBackbone(image_shape=(32, 32, 1))` (for `image_size`) would build the
default 28 x 28 model without a word. The zoo's backbones and tasks pass
what they do not take themselves through `check_model_kwargs` first
(`from_preset` checks its overrides before that, `zoo.models.presets`).
"""

import inspect

import keras_hub

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
        task: the task being built, with `preprocessor` set (or None).
        vocabulary_size: the backbone's number of token ids.
    """
    tokenizer = getattr(task.preprocessor, "tokenizer", None)
    if tokenizer is None or vocabulary_size is None:
        return
    try:
        size = int(tokenizer.vocabulary_size())
    except (ValueError, TypeError, AttributeError):
        return  # loading: the vocabulary comes from the file's assets next
    if size <= int(vocabulary_size):
        return
    raise ValueError(
        f"{type(task).__name__}: the tokenizer has {size} tokens but the "
        f"backbone embeds {vocabulary_size}. Build the backbone with "
        f"vocabulary_size={size} (or more)."
    )

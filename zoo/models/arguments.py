"""Unknown keyword arguments to a backbone or task are an error.

Keras' functional `Model` ignores keyword arguments it does not know, so
`ViTBackbone.from_preset("mnist", image_shape=(32, 32, 1))` (for
`image_size`) would build the preset's 28 x 28 model without a word. The
zoo's backbones and tasks pass what they do not take themselves through
`check_model_kwargs` first.
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

    >>> ViTBackbone(image_size=(28, 28), patch=4)
    Traceback (most recent call last):
      ...
    TypeError: ViTBackbone got an unexpected keyword argument 'patch'; ...
    """
    known = MODEL_KWARGS + (
        ("compile",) if isinstance(model, keras_hub.models.Task) else ())
    unknown = [key for key in kwargs if key not in known]
    if not unknown:
        return
    cls = type(model)
    taken = [name for name, p in
             inspect.signature(cls.__init__).parameters.items()
             if name != "self" and p.kind not in (p.VAR_POSITIONAL,
                                                   p.VAR_KEYWORD)]
    taken += [name for name in known if name not in taken]
    which = ("an unexpected keyword argument" if len(unknown) == 1
             else "unexpected keyword arguments")
    raise TypeError(
        f"{cls.__name__} got {which} "
        f"{', '.join(repr(k) for k in unknown)}; it takes "
        f"{', '.join(taken)}.")

"""zoo: backend-agnostic Keras 3 attention layers and models.

`import zoo` registers every layer and model with Keras serialization, so
`.keras` files that use them load with `keras.saving.load_model` (or
`zoo.saving.load_model`, which checks the file first).
"""

from zoo import _startup

_startup.quiet_imports()
_startup.keep_tensorflow_off_gpus()

from zoo import (  # noqa: E402  (after the start-up settings)
    data,
    layers,
    models,
    saving,
    schedules,
)

__version__ = "0.2.0"

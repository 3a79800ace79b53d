"""zoo: backend-agnostic Keras 3 attention layers and models.

`import zoo` registers every layer and model with Keras serialization, so
`.keras` files that use them load with `zoo.saving.load_model` (the
documented way: `keras.saving.load_model` after checking the file, so a
missing, empty or truncated file is one clear line rather than Keras'
"File not found").
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

"""zoo: backend-agnostic Keras 3 attention layers and models.

`import zoo` registers every layer and model with Keras serialization, so
`.keras` files that use them load with `keras.saving.load_model` (or
`zoo.saving.load_model`, which checks the file first).
"""

from zoo import _startup

_startup.quiet_imports()
_startup.keep_tensorflow_off_gpus()

from zoo import data  # noqa: E402
from zoo import layers  # noqa: E402
from zoo import models  # noqa: E402
from zoo import saving  # noqa: E402
from zoo import schedules  # noqa: E402

__version__ = "0.2.0"

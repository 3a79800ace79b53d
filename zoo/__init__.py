"""zoo: backend-agnostic Keras 3 attention layers and models.

`import zoo` registers every layer and model with Keras serialization, so
`.keras` files that use them load with `keras.saving.load_model`.
"""

from zoo import layers

try:
    # Text models run their tokenizer in tf.data and build on keras-hub's
    # Task; without those optional packages the layers still work.
    from zoo import data
    from zoo import models
except ModuleNotFoundError as error:  # pragma: no cover - depends on extras
    if error.name not in ("keras_hub", "tensorflow", "tensorflow_text"):
        raise

__version__ = "0.1.0"

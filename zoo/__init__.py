"""zoo: backend-agnostic Keras 3 attention layers and models.

`import zoo` registers every layer with Keras serialization, so `.keras` files
that use them load with `keras.saving.load_model`.
"""

from zoo import layers

__version__ = "0.1.0"

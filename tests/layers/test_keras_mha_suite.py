"""Keras' own `MultiHeadAttention` tests, run against `zoo.layers.MultiHeadAttention`.

The test module ships in the installed Keras wheel
(`keras/src/layers/attention/multi_head_attention_test.py`). It is read from
there and run with one change: its `layers` import is replaced by Keras'
layers with `MultiHeadAttention` swapped for the zoo's. Every test of it then
runs here under the suite's backend. The tests listed in `DEVIATIONS` check
behaviour the zoo changes on purpose; docs/backends.md explains each one.
"""

import importlib.util
import pathlib
import types

import pytest
from keras.src import layers as keras_layers

from zoo.layers import MultiHeadAttention

SUITE = (
    pathlib.Path(importlib.util.find_spec("keras").origin).parent
    / "src/layers/attention/multi_head_attention_test.py"
)
IMPORT = "from keras.src import layers\n"

# test name prefix -> why the zoo's layer behaves differently.
DEVIATIONS = {}


def _layers_with_zoo_mha():
    namespace = types.ModuleType("layers_with_zoo_mha")
    namespace.__dict__.update(vars(keras_layers))
    namespace.MultiHeadAttention = MultiHeadAttention
    return namespace


if not SUITE.exists():  # a Keras install without its tests
    pytest.skip(f"{SUITE} is not installed", allow_module_level=True)
_source = SUITE.read_text()
assert _source.count(IMPORT) == 1, f"{SUITE} no longer imports {IMPORT!r}"
layers = _layers_with_zoo_mha()
# Keras' test module, with the one import changed, defined in this module.
exec(compile(_source.replace(IMPORT, ""), str(SUITE), "exec"), globals())

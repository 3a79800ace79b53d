"""A quiet start: the frameworks' C++ start-up lines stay off the terminal.

TensorFlow (which keras-hub's tokenizers and tf.data pipelines load under
every backend) prints oneDNN, CUDA-driver and CPU-feature notices through
absl before Python can configure any logging, and `TF_CPP_MIN_LOG_LEVEL`
does not hide all of them. They are not errors, but they read like ones.
TensorFlow's first device query adds a failed `cuInit` line on machines
without a GPU. `import zoo` therefore sets `TF_CPP_MIN_LOG_LEVEL=3` (unless
already set: TensorFlow's C++ code then reports only fatal errors; its
Python exceptions are untouched, and oneDNN's notices about data types
it leaves to Eigen are hidden), then imports Keras, keras-hub and TensorFlow and lists
TensorFlow's devices with the process' stderr sent to a temporary file; if
that fails, what was captured is printed with the error. Set
`ZOO_VERBOSE_STARTUP=1` to see everything.

Under JAX and PyTorch, TensorFlow is only the input pipeline (tf.data,
keras-hub's tokenizers), so `import zoo` hides the GPUs from it: otherwise
it would reserve most of their memory for itself. Set `ZOO_TF_GPU=1` to
keep them visible. This module only configures the process; layers and
models never touch TensorFlow.
"""

import contextlib
import os
import sys
import tempfile


@contextlib.contextmanager
def _captured_stderr():
    """Sends file descriptor 2 (C and C++ writers included) to a temporary
    file; replays it if the block raises."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (an embedded interpreter)
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            capture.seek(0)
            sys.stderr.write(capture.read().decode("utf-8", "replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def quiet_imports():
    """Imports Keras and keras-hub (and through them the backend and
    TensorFlow) without their start-up notices."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if os.environ.get("ZOO_VERBOSE_STARTUP") or "keras_hub" in sys.modules:
        return
    with _captured_stderr():
        import keras  # noqa: F401
        import keras_hub  # noqa: F401

        try:
            import tensorflow as tf
        except ImportError:  # a JAX- or PyTorch-only install
            return
        tf.config.list_physical_devices()


def keep_tensorflow_off_gpus():
    """Hides the GPUs from TensorFlow unless Keras runs on TensorFlow (or
    `ZOO_TF_GPU=1`): the input pipeline runs on the CPU, and the backend
    keeps the GPU memory."""
    import keras

    if keras.backend.backend() == "tensorflow" or os.environ.get("ZOO_TF_GPU"):
        return
    try:
        import tensorflow as tf
    except ImportError:  # nothing to keep off the GPU
        return
    try:
        tf.config.set_visible_devices([], "GPU")
    except RuntimeError:  # TensorFlow already set up its devices
        pass

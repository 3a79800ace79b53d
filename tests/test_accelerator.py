"""zoo.accelerator under the current backend: where XLA compiles what a
call computes (`compiling_with_xla`, `xla_calls`). The allocator
statistics and peak throughputs are tested with `zoo.callbacks.Throughput`
(tests/test_callbacks.py), the compiled decoding step with the tasks
(tests/models/test_torch_compile.py)."""

import keras

from zoo.accelerator import compiling_with_xla, xla_calls


def test_compiling_with_xla_is_true_inside_xla_calls_under_tensorflow():
    backend = keras.backend.backend()
    assert compiling_with_xla() == (backend == "jax")
    with xla_calls():
        with xla_calls():
            assert compiling_with_xla() == (backend != "torch")
        assert compiling_with_xla() == (backend != "torch")
    assert compiling_with_xla() == (backend == "jax")


def test_xla_calls_ends_on_an_error():
    try:
        with xla_calls():
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    assert compiling_with_xla() == (keras.backend.backend() == "jax")


def test_xla_calls_marks_its_own_thread_only():
    import threading

    seen = []
    with xla_calls():
        other = threading.Thread(
            target=lambda: seen.append(compiling_with_xla())
        )
        other.start()
        other.join()
    assert seen == [keras.backend.backend() == "jax"]

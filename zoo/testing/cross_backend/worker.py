"""One backend's share of the cross-backend check, in its own process
(`python -m zoo.testing.cross_backend --worker --backend B --workdir D`,
started by `run_check` with `KERAS_BACKEND=B` in its environment, so Keras
is imported under B).

The workers talk through files in the workdir, each written atomically
(`zoo.saving`): `config.json` from `run_check`; the first backend's
`plan.json` and, per variant, `init.keras`, `data.pkl` and `setup.json`
(the "ready" marker); every backend's `saved-<b>.keras`, then under
`<variant>/<b>/` its `forward.npz`, `weights.npz`, `train.json`,
`saved.npz`, `preprocessed.json` and `generated.pkl`, and its
`worker-<b>.json`. A worker that fails makes `run_check` write `ABORT`,
which stops the others waiting for its files.
"""

import argparse
import importlib
import json
import os
import pickle
import sys
import time

import keras
import numpy as np

from zoo.saving import (
    save_model_atomic,
    save_npz_atomic,
    save_pickle_atomic,
    write_json_atomic,
)
from zoo.testing.backends import BACKENDS
from zoo.testing.cross_backend.hook import (
    call_check_setup,
    full_argv,
    full_metrics,
    load_hook,
    recipe_variants,
)

ABORT = "ABORT"  # written into the workdir when a worker fails
WAIT_TIMEOUT = 1800.0  # seconds a worker waits for another one's files


class _Aborted(RuntimeError):
    pass


def _wait_for(path, workdir, timeout=WAIT_TIMEOUT):
    """Waits for another worker's file (written atomically)."""
    start = time.monotonic()
    while not os.path.exists(path):
        if os.path.exists(os.path.join(workdir, ABORT)):
            raise _Aborted(f"another worker failed while waiting for {path}")
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"waited {timeout:.0f} s for {path}")
        time.sleep(0.2)


def _configure_precision(backend):
    """Full float32 matrix products for the active backend only.

    On NVIDIA GPUs (Ampere and later) the frameworks may run float32 matmuls
    and convolutions in TF32 (10-bit mantissa, ~1e-3 relative error), each
    with its own default; JAX on TPU uses bfloat16 passes by default. Turned
    off here so that every backend computes in true float32. No effect on
    CPUs.
    """
    if backend == "jax":
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(False)
    elif backend == "torch":
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")


def _framework_version(backend):
    module = {"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}
    try:
        return importlib.import_module(module[backend]).__version__
    except Exception:  # pragma: no cover - informational only
        return None


def _to_numpy(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        try:
            return np.asarray(x.numpy())
        except Exception:  # a backend tensor that needs Keras to convert
            pass
    return np.asarray(keras.ops.convert_to_numpy(x))


def _flat_arrays(structure):
    """The arrays of a nested structure (dicts by sorted key), as NumPy."""
    return [
        _to_numpy(x) for x in keras.tree.flatten(structure) if x is not None
    ]


def _as_one_array(structure):
    """Every array of `structure` flattened into one float64 vector (for
    max-abs comparisons of dict or tuple outputs)."""
    arrays = _flat_arrays(structure)
    if not arrays:
        return np.zeros(0)
    return np.concatenate([a.astype("float64").reshape(-1) for a in arrays])


def _preprocessed(model, inputs):
    """The task's preprocessor output on `inputs`, as arrays (None without
    a preprocessor)."""
    if getattr(model, "preprocessor", None) is None:
        return None
    return _flat_arrays(model.preprocess_samples(inputs))


def _same_arrays(a, b):
    if a is None or b is None:
        return a is None and b is None
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b)
    )


def _worker_setup(module, config, workdir, log):
    """check_setup for every variant, saved once for all backends."""
    known = recipe_variants(module)
    variants = config["variants"] or known
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(
            f"unknown variant(s) {unknown} of recipe "
            f"{config['recipe']}; known: {known}"
        )
    write_json_atomic(
        {"variants": variants, "full_metrics": full_metrics(module)},
        os.path.join(workdir, "plan.json"),
        strict=True,
    )
    for variant in variants:
        start = time.perf_counter()
        vdir = os.path.join(workdir, variant)
        os.makedirs(vdir, exist_ok=True)
        keras.backend.clear_session()
        setup = call_check_setup(
            module,
            variant,
            config["smoke"],
            config["steps"],
            config.get("data_dir"),
        )
        model = setup.model
        data = {
            "inputs": setup.inputs,
            "train_batches": list(setup.train_batches),
            "loss": setup.loss,
            "generate": setup.generate,
            # Each saved model's preprocessor must reproduce these exactly
            # on every backend.
            "preprocessed": _preprocessed(model, setup.inputs),
        }
        save_model_atomic(model, os.path.join(vdir, "init.keras"))
        save_pickle_atomic(data, os.path.join(vdir, "data.pkl"))
        write_json_atomic(
            {
                "steps": len(setup.train_batches),
                "parameters": int(model.count_params()),
                "setup_backend": keras.backend.backend(),
            },
            os.path.join(vdir, "setup.json"),
            strict=True,
        )  # the "ready" marker
        log(f"{variant}: setup {time.perf_counter() - start:.1f} s")


def _load_data(vdir):
    with open(os.path.join(vdir, "data.pkl"), "rb") as f:
        return pickle.load(f)


def _worker_forward_and_train(config, workdir, variant, backend, log):
    """Re-save, forward pass, SGD steps and trained model of one variant."""
    vdir = os.path.join(workdir, variant)
    out = os.path.join(vdir, backend)
    os.makedirs(out, exist_ok=True)
    _wait_for(os.path.join(vdir, "setup.json"), workdir)
    with open(os.path.join(vdir, "setup.json")) as f:
        setup = json.load(f)
    data = _load_data(vdir)
    start = time.perf_counter()
    model = keras.saving.load_model(os.path.join(vdir, "init.keras"))
    # First, so the other backends' saved-model loads can start early.
    save_model_atomic(model, os.path.join(vdir, f"saved-{backend}.keras"))

    # Compiled here, on this backend, with jit_compile="auto" resolved by
    # this backend (see docs/backends.md). Plain SGD by default.
    optimizer = {"sgd": keras.optimizers.SGD, "adam": keras.optimizers.Adam}[
        config["optimizer"]
    ]
    options = {
        "optimizer": optimizer(learning_rate=config["learning_rate"]),
        "jit_compile": "auto",
    }
    if data["loss"] is not None:
        options["loss"] = data["loss"]
    model.compile(**options)
    forward = _as_one_array(model.predict_on_batch(data["inputs"]))
    save_npz_atomic({"outputs": forward}, os.path.join(out, "forward.npz"))
    timings = {
        "forward": time.perf_counter() - start,
        "jit_compile": bool(model.jit_compile),
    }

    if setup["steps"] and config["steps"]:
        start = time.perf_counter()
        losses = []
        for x, y in data["train_batches"]:
            logs = model.train_on_batch(x, y, return_dict=True)
            losses.append(float(logs["loss"]))
        # Float weights only (a dropout's integer seed state is no weight).
        weights = [
            v
            for v in model.weights
            if np.issubdtype(np.dtype(v.dtype), np.floating)
        ]
        save_npz_atomic(
            {f"w{i:04d}": _to_numpy(v) for i, v in enumerate(weights)},
            os.path.join(out, "weights.npz"),
        )
        write_json_atomic(
            {"losses": losses, "names": [v.path for v in weights]},
            os.path.join(out, "train.json"),
            strict=True,
        )
        save_model_atomic(model, os.path.join(vdir, f"trained-{backend}.keras"))
        timings["train"] = time.perf_counter() - start
    log(
        f"{variant}: forward {timings['forward']:.1f} s, train "
        f"{timings.get('train', 0.0):.1f} s (jit_compile "
        f"{timings['jit_compile']})"
    )
    return timings


def _worker_saved_matrix(config, workdir, variant, backend, log):
    """Loads every backend's saved model: predictions on the raw inputs,
    the preprocessor's arrays, and generations when the setup asks."""
    vdir = os.path.join(workdir, variant)
    data = _load_data(vdir)
    start = time.perf_counter()
    arrays, matches, generated = {}, {}, {}
    for saver in config["backends"]:
        path = os.path.join(vdir, f"saved-{saver}.keras")
        _wait_for(path, workdir)
        t0 = time.perf_counter()
        model = keras.saving.load_model(path)
        t1 = time.perf_counter()
        arrays[saver] = _as_one_array(model.predict_on_batch(data["inputs"]))
        matches[saver] = _same_arrays(
            _preprocessed(model, data["inputs"]), data["preprocessed"]
        )
        if data["generate"]:
            output = model.generate(**data["generate"])
            generated[saver] = (
                output
                if isinstance(output, (str, list))
                else _flat_arrays(output)
            )
        log(
            f"{variant}: saved-{saver}.keras load {t1 - t0:.1f} s, predict"
            f"{' and generate' if data['generate'] else ''} "
            f"{time.perf_counter() - t1:.1f} s"
        )
        del model
    out = os.path.join(vdir, backend)
    save_npz_atomic(arrays, os.path.join(out, "saved.npz"))
    write_json_atomic(
        matches, os.path.join(out, "preprocessed.json"), strict=True
    )
    if data["generate"]:
        save_pickle_atomic(generated, os.path.join(out, "generated.pkl"))
    seconds = time.perf_counter() - start
    log(f"{variant}: saved-model matrix {seconds:.1f} s")
    return seconds


def _worker_full(module, config, workdir, variant, backend, log):
    """The hook's whole run, `main(argv)`, as its command line runs it."""
    argv = full_argv(
        module,
        variant,
        config["smoke"],
        os.path.join(workdir, "full", variant, backend),
        config.get("data_dir"),
    )
    start = time.perf_counter()
    keras.backend.clear_session()
    module.main(argv)
    seconds = time.perf_counter() - start
    log(f"{variant}: full recipe run {seconds:.1f} s")
    return seconds


def worker_main(backend, workdir):
    """Does this backend's share of the check described by
    `<workdir>/config.json`; returns 0 (raises on a failure)."""
    start = time.perf_counter()
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)

    def log(message):  # times from the parent's start, comparable across logs
        print(
            f"[{backend} {time.time() - config['started']:6.1f} s] {message}",
            flush=True,
        )

    log("started")
    if keras.backend.backend() != backend:
        raise SystemExit(
            f"KERAS_BACKEND is {keras.backend.backend()!r}, "
            f"expected {backend!r}"
        )
    _configure_precision(backend)
    module = load_hook(config["hook"])
    log(f"imports done (keras {keras.__version__})")
    if backend == config["backends"][0]:
        _worker_setup(module, config, workdir, log)
    _wait_for(os.path.join(workdir, "plan.json"), workdir)
    with open(os.path.join(workdir, "plan.json")) as f:
        variants = json.load(f)["variants"]
    timings = {}
    for variant in variants:
        timings[variant] = _worker_forward_and_train(
            config, workdir, variant, backend, log
        )
    for variant in variants:
        timings[variant]["saved"] = _worker_saved_matrix(
            config, workdir, variant, backend, log
        )
    if config["full"]:
        for variant in variants:
            timings[variant]["full"] = _worker_full(
                module, config, workdir, variant, backend, log
            )
    write_json_atomic(
        {
            "backend": backend,
            "keras": keras.__version__,
            "framework": _framework_version(backend),
            "seconds": time.perf_counter() - start,
            "timings": timings,
        },
        os.path.join(workdir, f"worker-{backend}.json"),
        strict=True,
    )
    log("done")
    return 0


def main(argv=None):
    """The worker entry point (`python -m zoo.testing.cross_backend
    --worker --backend B --workdir D`), started by `run_check`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", required=True)
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    try:
        return worker_main(args.backend, os.path.abspath(args.workdir))
    except _Aborted as error:
        print(f"aborted: {error}", file=sys.stderr)
        return 3

"""One backend's share of the cross-backend check, in its own process
(`python -m zoo.testing.cross_backend --worker --backend B --workdir D`,
started by `run_checks` with `KERAS_BACKEND=B` in its environment, so Keras
is imported under B). One worker checks every recipe of the run, one after
the other, in the order of `<workdir>/checks.json`, the same on every
backend.

The workers talk through files, each written atomically (`zoo.saving`).
Each recipe has its own folder `<workdir>/<recipe>/`: `config.json` from
`run_checks`; the first backend's `plan.json` and, per variant,
`init.keras`, `data.pkl` and `setup.json` (the "ready" marker); every
backend's `saved-<b>.keras`, then under `<variant>/<b>/` its
`forward.npz`, `weights.npz`, `train.json`, `saved.npz`,
`preprocessed.json` and `generated.pkl`; the worker's output while it
checks that recipe in `logs/<b>.log`, and its `worker-<b>.json` (status
"done", "failed" or "aborted", timings). A worker that fails on a recipe
writes `ABORT` into that recipe's folder, which stops the others waiting
for its files there, and goes on to the next recipe; a worker process that
ends without finishing every recipe makes `run_checks` write `ABORT` into
the workdir, which stops every wait.
"""

import argparse
import contextlib
import importlib
import json
import os
import pickle
import sys
import time
import traceback

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

ABORT = "ABORT"  # written into a recipe's folder or the workdir on failure
WAIT_TIMEOUT = 1800.0  # seconds a worker waits for another one's files
CHECKS = "checks.json"  # the workdir's list of recipes, in their order


class _Aborted(RuntimeError):
    pass


def _wait_for(path, rdir, timeout=WAIT_TIMEOUT):
    """Waits for another worker's file (written atomically) in the recipe
    folder `rdir`; stops when `ABORT` appears there or in the workdir
    above it."""
    start = time.monotonic()
    aborts = [
        os.path.join(rdir, ABORT),
        os.path.join(os.path.dirname(rdir), ABORT),
    ]
    while not os.path.exists(path):
        if any(os.path.exists(abort) for abort in aborts):
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


def _worker_setup(module, config, rdir, log):
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
        os.path.join(rdir, "plan.json"),
        strict=True,
    )
    for variant in variants:
        start = time.perf_counter()
        vdir = os.path.join(rdir, variant)
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


def _worker_forward_and_train(config, rdir, variant, backend, log):
    """Re-save, forward pass, SGD steps and trained model of one variant."""
    vdir = os.path.join(rdir, variant)
    out = os.path.join(vdir, backend)
    os.makedirs(out, exist_ok=True)
    _wait_for(os.path.join(vdir, "setup.json"), rdir)
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


def _description(model):
    """A model's whole serialised form (config, build and compile config)
    and its preprocessor's vocabularies (saved as assets, not in the
    config), as text that compares equal for models of the same saved
    settings."""
    vocabularies = []
    preprocessor = getattr(model, "preprocessor", None)
    if isinstance(preprocessor, keras.layers.Layer):
        for layer in preprocessor._flatten_layers():
            if hasattr(layer, "get_vocabulary"):
                vocabularies.append(
                    [str(token) for token in layer.get_vocabulary()]
                )
    return json.dumps(
        [keras.saving.serialize_keras_object(model), vocabularies],
        sort_keys=True,
        default=str,
    )


def _generator_for(model, first):
    """The model that generates for `model`, a freshly loaded file: `first`
    (the model of the matrix's first file, whose generate function this
    backend has already traced) carrying `model`'s weights when both files
    describe the same model (`_description`), else `model` itself.

    The savers' files differ only in their weights, and a fresh model
    traces its own generate function, seconds per family under TensorFlow
    and JAX; with the weights moved into `first`, each file's weights
    still write the text compared across savers, and each loaded model
    still predicts and preprocesses on its own."""
    if first is None or first is model:
        return model
    if _description(first) != _description(model):
        return model
    first.set_weights(model.get_weights())
    return first


def _worker_saved_matrix(config, rdir, variant, backend, log):
    """Loads every backend's saved model: predictions on the raw inputs,
    the preprocessor's arrays, and generations when the setup asks (all
    through the first file's model, see `_generator_for`)."""
    vdir = os.path.join(rdir, variant)
    data = _load_data(vdir)
    start = time.perf_counter()
    arrays, matches, generated = {}, {}, {}
    first = None
    for saver in config["backends"]:
        path = os.path.join(vdir, f"saved-{saver}.keras")
        _wait_for(path, rdir)
        t0 = time.perf_counter()
        model = keras.saving.load_model(path)
        t1 = time.perf_counter()
        arrays[saver] = _as_one_array(model.predict_on_batch(data["inputs"]))
        matches[saver] = _same_arrays(
            _preprocessed(model, data["inputs"]), data["preprocessed"]
        )
        if data["generate"]:
            options = dict(data["generate"])
            generator = _generator_for(model, first)
            first = generator if first is None else first
            output = getattr(generator, options.pop("method", "generate"))(
                **options
            )
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


def _worker_full(module, config, rdir, variant, backend, log):
    """The hook's whole run, `main(argv)`, as its command line runs it."""
    argv = full_argv(
        module,
        variant,
        config["smoke"],
        os.path.join(rdir, "full", variant, backend),
        config.get("data_dir"),
    )
    start = time.perf_counter()
    keras.backend.clear_session()
    module.main(argv)
    seconds = time.perf_counter() - start
    log(f"{variant}: full recipe run {seconds:.1f} s")
    return seconds


@contextlib.contextmanager
def _output_to(path):
    """Sends this process' stdout and stderr (file descriptors 1 and 2, so
    the frameworks' own C++ messages too) to `path` while in the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    saved = os.dup(1), os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (target, *saved):
            os.close(fd)


def _check_recipe(backend, rdir, log):
    """This backend's share of one recipe's check, described by
    `<rdir>/config.json`; returns the timings per variant."""
    with open(os.path.join(rdir, "config.json")) as f:
        config = json.load(f)
    keras.backend.clear_session()
    module = load_hook(config["hook"])
    log(f"{config['recipe']}: hook imported")
    if backend == config["backends"][0]:
        _worker_setup(module, config, rdir, log)
    _wait_for(os.path.join(rdir, "plan.json"), rdir)
    with open(os.path.join(rdir, "plan.json")) as f:
        variants = json.load(f)["variants"]
    timings = {}
    for variant in variants:
        timings[variant] = _worker_forward_and_train(
            config, rdir, variant, backend, log
        )
    for variant in variants:
        timings[variant]["saved"] = _worker_saved_matrix(
            config, rdir, variant, backend, log
        )
    if config["full"]:
        for variant in variants:
            timings[variant]["full"] = _worker_full(
                module, config, rdir, variant, backend, log
            )
    return timings


def _error_line(error):
    """An exception as one line (a `SystemExit` by its message alone)."""
    if isinstance(error, SystemExit):
        return " ".join(str(error.code).split())
    return " ".join(f"{type(error).__name__}: {error}".split())


def worker_main(backend, workdir):
    """Does this backend's share of the check of every recipe listed in
    `<workdir>/checks.json`, in that order, each in its folder (see the
    module docstring). A recipe that fails (or that another worker failed)
    is recorded in its `worker-<backend>.json` and the next one goes on.

    Returns:
        0 when every recipe's share was done, 1 when one failed here, else
        3 (another worker failed one).
    """
    with open(os.path.join(workdir, CHECKS)) as f:
        run = json.load(f)

    def log(message):  # times from the parent's start, comparable across logs
        print(
            f"[{backend} {time.time() - run['started']:6.1f} s] {message}",
            flush=True,
        )

    log("started")
    if keras.backend.backend() != backend:
        raise SystemExit(
            f"KERAS_BACKEND is {keras.backend.backend()!r}, "
            f"expected {backend!r}"
        )
    _configure_precision(backend)
    log(f"imports done (keras {keras.__version__})")
    statuses = []
    for recipe in run["recipes"]:
        rdir = os.path.join(workdir, recipe)
        start, started = time.perf_counter(), time.time()
        info = {"status": "done", "error": None, "timings": {}}
        with _output_to(os.path.join(rdir, "logs", f"{backend}.log")):
            try:
                info["timings"] = _check_recipe(backend, rdir, log)
            except _Aborted as error:
                print(f"aborted: {error}", file=sys.stderr, flush=True)
                info.update(status="aborted", error=str(error))
            except (Exception, SystemExit) as error:
                if isinstance(error, SystemExit):  # as Python prints it
                    print(error.code, file=sys.stderr)
                else:
                    traceback.print_exc()
                sys.stderr.flush()
                # The others stop waiting for this worker's files here.
                open(os.path.join(rdir, ABORT), "w").close()
                info.update(status="failed", error=_error_line(error))
        write_json_atomic(
            {
                "backend": backend,
                "keras": keras.__version__,
                "framework": _framework_version(backend),
                **info,
                "seconds": time.perf_counter() - start,
                "started": started,
                "finished": time.time(),
            },
            os.path.join(rdir, f"worker-{backend}.json"),
            strict=True,
        )
        log(f"{recipe}: {info['status']}")
        statuses.append(info["status"])
    log("done")
    if "failed" in statuses:
        return 1
    return 3 if "aborted" in statuses else 0


def main(argv=None):
    """The worker entry point (`python -m zoo.testing.cross_backend
    --worker --backend B --workdir D`), started by `run_checks`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--worker", action="store_true", required=True)
    parser.add_argument("--backend", required=True, choices=BACKENDS)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args(argv)
    return worker_main(args.backend, os.path.abspath(args.workdir))

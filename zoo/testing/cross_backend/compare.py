"""Do JAX, TensorFlow and PyTorch agree on a recipe's model? A library for
checking it, with a thin command line in `recipes/check_backends.py`:

    python recipes/check_backends.py imdb_attention --smoke
    python recipes/check_backends.py gpt_text --smoke
    python recipes/check_backends.py imdb_attention --smoke --variants imdb_attention --no-train
    python recipes/check_backends.py imdb_attention --smoke --full   # + whole recipe runs

## The contract a recipe implements

A recipe module (`recipes/<name>.py`) plugs in with one hook,

    check_setup(variant, smoke=True, seed=1337, num_steps=20, data_dir=None)
        -> CheckSetup

(`variant` is left out when the module has no `CHECK_VARIANTS`), and may
declare `CHECK_VARIANTS` (names; default one "default"),
`CHECK_FULL_METRICS` (`{metrics.json key: tolerance}` for `--full`;
default validation and test accuracy within 0.01) and `CHECK_DATA_FLAG`
(how its `main` takes a local data path; default "--data-dir").
`CheckSetup` holds:

* `model`: the task with fresh weights and dropout off, preprocessor
  included (keras-hub's `Task`s: `predict_on_batch` and `train_on_batch`
  take raw inputs);
* `inputs`: one batch in the form the task's `predict` takes: raw strings,
  float or uint8 images, int ids, or a dict of them;
* `train_batches`: `num_steps` pairs `(x, y)` in that form (`y` may be None
  when the preprocessor makes the targets, as a causal LM's does), chosen
  in a NumPy-seeded order;
* `loss`: the loss to train with (None: the task's default);
* `generate` (optional): keyword arguments of `model.generate` (greedy by
  default), compared as exact text.

## How it runs

This process only orchestrates. Every backend runs in its own fresh
subprocess (`python -m zoo.testing.cross_backend --worker`, started through
`zoo.testing.backends`), all at once (each one waits for the others' saved
models, written atomically), and each does all its work in one go, so
every framework is imported once per backend:

1. setup (the first backend only): `check_setup`, then the model is saved to
   `<workdir>/<variant>/init.keras` (initial weights, preprocessor and
   vocabulary) and the inputs and batches pickled beside it, with the
   preprocessor's output on the inputs. Every backend starts from these
   files, never from its own initialisation;
2. every backend: load `init.keras`, re-save it as `saved-<backend>.keras`;
   compile on this backend; forward pass `model.predict_on_batch(inputs)`;
   `--steps` plain-SGD `train_on_batch` steps over the same batches
   (per-step losses, final weights); the trained model goes to
   `trained-<backend>.keras`;
3. every backend loads every `saved-<b>.keras`, predicts on the raw inputs
   (a 3x3 matrix compared with the model saved and loaded by the first
   backend), checks that the preprocessor gives the setup's arrays exactly,
   and runs `generate` when the setup asks (every cell the same text);
4. `--full`: every backend runs the whole recipe (`main([...variant flags,
   "--smoke"?, "--output-dir", ...])`) and the recipe's
   `CHECK_FULL_METRICS` are compared (these runs start from each backend's
   own random initialisation and dropout masks, so this is a check for
   real data).

Checks and tolerances (float32):

| check          | measure                                    | tolerance    |
| -------------- | ------------------------------------------ | ------------ |
| forward        | max abs difference, every pair of backends | 1e-5         |
| loss           | max relative difference over the steps     | 1e-4         |
| weights        | max abs difference after the last step     | reported (*) |
| saved 3x3      | max abs difference to the reference cell   | 1e-5         |
| preprocessing  | the saved preprocessor's arrays, every cell | exact       |
| generate       | generated text, every cell                 | exact        |
| full           | the recipe's metrics, every pair           | the recipe's |

(*) the weights after step k decide the loss of step k+1, so the loss check
already gates every update but the last.

Known sources of divergence, and how each is handled (never by loosening a
tolerance):

* Per-backend random number generators: the same seed draws different
  numbers on JAX, TensorFlow and PyTorch. The initial weights travel in
  `init.keras` (made once, loaded everywhere), the batch order comes from
  NumPy inside `check_setup`, and `check_setup` turns dropout off.
* Keras default epsilons: training uses plain SGD (no momentum), whose update
  `lr * g` is linear in the gradient and has no epsilon: a rounding
  difference in `g` stays a rounding difference in the weights. Adam's
  `m / (sqrt(v) + eps)` normalises each coordinate, so for a gradient whose
  true value is ~0 the step is rounding noise divided by a quantity the
  epsilon decides. LayerNormalization's epsilon and the loss's clipping
  epsilon (`keras.config.epsilon()`) are Keras settings, identical on every
  backend.
* TensorFlow's sparse embedding gradients: TF hands the optimizer an
  `IndexedSlices` with one slice per token occurrence, and Keras's TF
  `ops.square` squares the slices *before* duplicates are summed, so Adam's
  second moment for a token seen k times in a batch is `sum(g_i^2)`, not
  `(sum g_i)^2` (JAX and PyTorch get dense gradients). Measured with
  `--optimizer adam` (attention, 20 steps): TF vs JAX/PyTorch loss 3.6e-2
  relative, weights 0.1; densifying the gradient brings it to 1.7e-7. SGD's
  update is linear, so duplicates sum correctly: the default check is
  immune; `--optimizer adam` shows the divergence (the recipes train with
  Adam, so their TensorFlow runs are affected).
* TF32 matrix products on NVIDIA GPUs (and bfloat16 passes on TPUs): each
  backend subprocess turns them off for its own framework before running
  (`jax_default_matmul_precision="highest"`,
  `tf.config.experimental.enable_tensor_float_32_execution(False)`,
  `torch.backends.{cuda.matmul,cudnn}.allow_tf32 = False`).
* Fused vs explicit attention: zoo chooses the path from shapes and call
  arguments only, so every backend takes the same path.
* Fully masked rows: zoo returns zeros (not NaN, not mean(V)) on every
  backend and on both attention paths.
* Preprocessing inside saved models: strings are tokenised by TensorFlow
  in `tf.data` (or by Python) on every backend and token ids are int32;
  the saved-model check asserts the preprocessed arrays are identical.
* Compile settings saved in `.keras` files: Keras saves the *resolved*
  `jit_compile` (JAX resolves "auto" to True) and restores it on load, so a
  JAX-made model would run through torch.compile under PyTorch (and XLA
  under TensorFlow on CPU). The zoo's tasks store portable settings
  (`zoo.models.portable`) and each backend recompiles the loaded model
  itself (`jit_compile="auto"` resolved on its own backend). The saved
  files are also scanned, and backend-tied entries are listed as warnings
  (not gated): a saved `jit_compile: true`, and classes from
  `keras.src.backend.<name>` (under PyTorch `keras.optimizers.Adam` is a
  torch-only subclass).
* Greedy generation: the argmax of logits that agree to ~1e-7; a tie
  closer than that would flip a token, which the exact-text check would
  report.

What remains is float32 rounding from different kernels and summation
orders (oneDNN on TensorFlow and PyTorch CPUs, XLA on JAX): about 1e-7 on
the outputs, well inside the tolerances.
"""

import argparse
import dataclasses
import importlib
import itertools
import json
import math
import os
import pickle
import shutil
import sys
import tempfile
import time
from typing import Any

import numpy as np

from zoo.testing.backends import BACKENDS, python_command, start_on_backend

TOLERANCES = {
    "forward": 1e-5,  # max abs difference of the outputs, float32
    "loss": 1e-4,  # max relative difference of the per-step losses
    "weights": None,  # reported; the next step's loss gates each update
    "saved": 1e-5,  # max abs difference, saved-model 3x3 matrix
}
FULL_METRICS = {"validation_accuracy": 0.01, "test_accuracy": 0.01}
# Plain SGD, no momentum: deterministic, linear in the gradient and free of
# optimizer epsilons (see the module docstring); 0.1 moves the weights
# enough to matter in 20 steps. Adam is there to diagnose, not the default.
OPTIMIZERS = ("sgd", "adam")
LEARNING_RATES = {"sgd": 0.1, "adam": 0.01}
ABORT = "ABORT"  # written into the workdir when a worker fails
WAIT_TIMEOUT = 1800.0  # seconds a worker waits for another one's files


@dataclasses.dataclass
class CheckSetup:
    """What a recipe's `check_setup` hands the cross-backend check (see the
    module docstring).

    Args:
        model: the task, fresh weights, dropout off.
        inputs: one batch in the form the task's `predict` takes.
        train_batches: `(x, y)` pairs in that form; `y` may be None.
        loss: the training loss (None: the task's default).
        generate: optional keyword arguments of `model.generate`.
    """

    model: Any
    inputs: Any
    train_batches: list
    loss: Any = None
    generate: dict = None


# ---- Comparisons (pure NumPy; what the tests exercise) -----------------------


def max_abs_diff(a, b):
    """Largest |a - b|; inf when shapes differ or anything is not finite
    (a NaN must never compare as "within tolerance")."""
    a = np.asarray(a, dtype="float64")
    b = np.asarray(b, dtype="float64")
    if a.shape != b.shape:
        return math.inf
    if a.size == 0:
        return 0.0
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return math.inf
    return float(np.max(np.abs(a - b)))


def relative_diffs(a, b):
    """Elementwise |a - b| / max(|a|, |b|) (0 where both are 0; inf where
    anything is not finite)."""
    a = np.asarray(a, dtype="float64")
    b = np.asarray(b, dtype="float64")
    if a.shape != b.shape:
        return np.full(max(a.size, b.size, 1), math.inf)
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(
            scale > 0, np.abs(a - b) / np.where(scale > 0, scale, 1), 0.0
        )
    rel[~(np.isfinite(a) & np.isfinite(b))] = math.inf
    return rel


def pair_name(a, b):
    return f"{a} vs {b}"


def _pairs(backends):
    return list(itertools.combinations(backends, 2))


def _gate(value, tolerance):
    return tolerance is None or value <= tolerance


def _fmt(value):
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if not math.isfinite(value):
        return "inf" if value > 0 else str(value)
    return f"{value:.1e}"


def compare_forward(outputs, backends, tolerance=TOLERANCES["forward"]):
    """outputs: backend -> array. Max abs difference of every pair."""
    pairs = {
        pair_name(a, b): max_abs_diff(outputs[a], outputs[b])
        for a, b in _pairs(backends)
    }
    worst = max(pairs.values(), default=0.0)
    failures = [
        f"forward: {p} max abs diff {_fmt(d)} > {_fmt(tolerance)}"
        for p, d in pairs.items()
        if not _gate(d, tolerance)
    ]
    return {
        "pairs": pairs,
        "max": worst,
        "tolerance": tolerance,
        "passed": not failures,
        "failures": failures,
    }


def compare_losses(losses, backends, tolerance=TOLERANCES["loss"]):
    """losses: backend -> per-step losses. Max relative difference of every
    pair over the steps, and the step where it happens."""
    pairs, steps, first = {}, {}, {}
    for a, b in _pairs(backends):
        rel = relative_diffs(losses[a], losses[b])
        name = pair_name(a, b)
        pairs[name] = float(rel.max()) if rel.size else 0.0
        steps[name] = int(rel.argmax()) if rel.size else None
        over = np.flatnonzero(rel > tolerance) if tolerance is not None else []
        first[name] = int(over[0]) if len(over) else None
    worst = max(pairs.values(), default=0.0)
    failures = [
        f"loss: {p} max rel diff {_fmt(d)} > {_fmt(tolerance)} "
        f"(worst at step {steps[p]}, first over at step {first[p]})"
        for p, d in pairs.items()
        if not _gate(d, tolerance)
    ]
    return {
        "per_step": {b: [float(x) for x in losses[b]] for b in backends},
        "pairs": pairs,
        "worst_step": steps,
        "first_step_over": first,
        "max": worst,
        "tolerance": tolerance,
        "passed": not failures,
        "failures": failures,
    }


def compare_weights(weights, backends, tolerance=TOLERANCES["weights"]):
    """weights: backend -> {path: array}. Max abs difference of every pair,
    weight by weight (matched by path, whatever order each backend lists its
    weights in), and the weight where it happens; a weight that one backend
    lacks is an infinite difference, named."""
    pairs, where = {}, {}
    for a, b in _pairs(backends):
        name = pair_name(a, b)
        wa, wb = weights[a], weights[b]
        if set(wa) != set(wb):
            only = [
                f"only under {x}: {', '.join(sorted(set(wx) - set(wy))[:3])}"
                for x, wx, wy in ((a, wa, wb), (b, wb, wa))
                if set(wx) - set(wy)
            ]
            pairs[name], where[name] = math.inf, f"({'; '.join(only)})"
            continue
        paths = sorted(wa)
        diffs = [max_abs_diff(wa[p], wb[p]) for p in paths]
        pairs[name] = max(diffs, default=0.0)
        where[name] = paths[int(np.argmax(diffs))] if diffs else None
    worst = max(pairs.values(), default=0.0)
    failures = [
        f"weights: {p} max abs diff {_fmt(d)} > {_fmt(tolerance)} ({where[p]})"
        for p, d in pairs.items()
        if not _gate(d, tolerance)
    ]
    return {
        "pairs": pairs,
        "worst_weight": where,
        "max": worst,
        "tolerance": tolerance,
        "passed": not failures,
        "failures": failures,
    }


def _unique(names):
    """Paths made unique in order of appearance: the second 'dense/kernel'
    becomes 'dense/kernel#2'."""
    seen, unique = {}, []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def compare_saved(
    outputs, preprocessed_match, backends, tolerance=TOLERANCES["saved"]
):
    """outputs: loader -> saver -> predictions on the raw inputs. Every cell
    against the reference (saved and loaded by the first backend), and
    whether each cell's preprocessor reproduced the setup's arrays."""
    ref = backends[0]
    reference = outputs[ref][ref]
    matrix = {
        saver: {
            loader: max_abs_diff(outputs[loader][saver], reference)
            for loader in backends
        }
        for saver in backends
    }
    worst = max(
        (d for row in matrix.values() for d in row.values()), default=0.0
    )
    failures = [
        f"saved: saved by {saver}, loaded by {loader} vs saved and loaded by "
        f"{ref}: max abs diff {_fmt(d)} > {_fmt(tolerance)}"
        for saver, row in matrix.items()
        for loader, d in row.items()
        if not _gate(d, tolerance)
    ]
    failures += [
        f"saved: the preprocessor of saved-{saver}.keras loaded by {loader} "
        "gives other arrays than the setup's"
        for loader in backends
        for saver in backends
        if not preprocessed_match[loader][saver]
    ]
    return {
        "reference": f"saved by {ref}, loaded by {ref}",
        "matrix": matrix,
        "preprocessed_match": preprocessed_match,
        "max": worst,
        "tolerance": tolerance,
        "passed": not failures,
        "failures": failures,
    }


def compare_generations(texts, backends):
    """texts: loader -> saver -> generated outputs (strings, or arrays of
    ids). Every cell must equal the reference cell exactly."""
    ref = backends[0]
    reference = texts[ref][ref]

    def same(a, b):
        try:
            return bool(
                np.array_equal(
                    np.asarray(a, dtype=object), np.asarray(b, dtype=object)
                )
            )
        except ValueError:
            return a == b

    matrix = {
        saver: {
            loader: same(texts[loader][saver], reference) for loader in backends
        }
        for saver in backends
    }
    failures = [
        f"generate: saved by {saver}, loaded by {loader} generates other "
        f"text than saved and loaded by {ref}"
        for saver, row in matrix.items()
        for loader, ok in row.items()
        if not ok
    ]
    differing = sum(not ok for row in matrix.values() for ok in row.values())
    return {
        "reference": reference,
        "matrix": matrix,
        "max": differing,
        "tolerance": 0,
        "passed": not failures,
        "failures": failures,
    }


def compare_full(metrics, backends, tolerances=None):
    """metrics: backend -> metrics.json of a whole recipe run; tolerances:
    metric -> largest allowed difference between two backends."""
    tolerances = FULL_METRICS if tolerances is None else tolerances
    keys = [k for k in tolerances if all(k in metrics[b] for b in backends)]
    pairs, failures = {}, []
    for a, b in _pairs(backends):
        for key in keys:
            name = f"{pair_name(a, b)} {key}"
            pairs[name] = abs(float(metrics[a][key]) - float(metrics[b][key]))
            if pairs[name] > tolerances[key]:
                failures.append(
                    f"full: {name} differs by {pairs[name]:.4f} "
                    f"> {tolerances[key]}"
                )
    worst = max(pairs.values(), default=0.0)
    if not keys:
        failures.append(
            f"full: no metric of {sorted(tolerances)} in every "
            "backend's metrics.json"
        )
    values = {b: {k: metrics[b].get(k) for k in tolerances} for b in backends}
    return {
        "metrics": values,
        "pairs": pairs,
        "max": worst,
        "tolerance": tolerances,
        "passed": not failures,
        "failures": failures,
    }


def portability_issues(config):
    """What in a saved model's config.json ties the file to one backend.

    Not gated (reported as warnings): the numbers still agree, but
    * an object whose class lives in `keras.src.backend.<name>` (PyTorch's
      optimizers: `keras.optimizers.Adam` *is* a torch-only subclass under
      that backend) makes loading import that framework, fail without it,
      and the restored optimizer crash in `fit` under any other backend;
    * a saved `jit_compile: true` is the saving backend's resolution of
      "auto" (True on JAX), restored as is: PyTorch then runs
      `backbone.predict`/`fit` through torch.compile.
    """
    issues = []

    def walk(node, where):
        if isinstance(node, list):
            for item in node:
                walk(item, where)
            return
        if not isinstance(node, dict):
            return
        module = node.get("module")
        if isinstance(module, str) and module.startswith("keras.src.backend."):
            backend = module.split(".")[3]
            issues.append(
                f"{where or 'model'}: {node.get('class_name')} is "
                f"{module}.{node.get('class_name')}: loading needs {backend} "
                f"installed, and the object works only under {backend}"
            )
        compile_config = node.get("compile_config")
        if isinstance(compile_config, dict) and (
            compile_config.get("jit_compile") is True
        ):
            issues.append(
                f"{where or 'model'}: compile_config has jit_compile=True "
                "(the saving backend's resolution of 'auto'): loaded under "
                "torch, predict/fit run through torch.compile"
            )
        for key, value in node.items():
            if key in ("config", "module", "class_name", "registered_name"):
                walk(value, where)
            else:
                walk(value, f"{where}.{key}" if where else key)

    walk(config, "")
    return sorted(set(issues))


def scan_saved_model(path):
    """portability_issues of a `.keras` file (a zip holding config.json)."""
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return portability_issues(json.loads(archive.read("config.json")))


CHECKS = ("forward", "loss", "weights", "saved", "generate", "full")


def compare_variant(raw, backends):
    """Every check of one variant from the workers' raw results.

    raw: {"forward": {b: array}, "losses": {b: [..]} or None,
          "weights": {b: {path: array}} or None,
          "saved": {loader: {saver: array}}, "preprocessed_match":
          {loader: {saver: bool}}, "generated": {loader: {saver: outputs}}
          or None, "full": {b: metrics} or None, "full_tolerances": {..},
          "errors": [str]}
    Missing pieces (a worker that failed) are reported in "errors"; a check
    whose data is incomplete is skipped and the variant fails.
    """
    result = {check: None for check in CHECKS}
    failures = list(raw.get("errors", []))

    def complete(key, nested=False):
        data = raw.get(key)
        if data is None or any(b not in data for b in backends):
            return False
        return not nested or all(
            s in data[b] for b in backends for s in backends
        )

    if complete("forward"):
        result["forward"] = compare_forward(raw["forward"], backends)
    if complete("losses"):
        result["loss"] = compare_losses(raw["losses"], backends)
    if complete("weights"):
        result["weights"] = compare_weights(raw["weights"], backends)
    if complete("saved", nested=True) and complete(
        "preprocessed_match", nested=True
    ):
        result["saved"] = compare_saved(
            raw["saved"], raw["preprocessed_match"], backends
        )
    if complete("generated", nested=True):
        result["generate"] = compare_generations(raw["generated"], backends)
    if complete("full"):
        result["full"] = compare_full(
            raw["full"], backends, raw.get("full_tolerances")
        )
    for check in CHECKS:
        if result[check] is not None:
            failures += result[check]["failures"]
    result["failures"] = failures
    result["passed"] = not failures
    return result


def build_report(
    recipe,
    variant_results,
    backends,
    *,
    smoke,
    steps,
    full,
    optimizer="sgd",
    learning_rate=None,
    wall_seconds=None,
    workers=None,
    full_tolerances=None,
):
    """The whole report: settings, every variant's checks, the failures."""
    failures = [
        f"{variant}: {message}"
        for variant, result in variant_results.items()
        for message in result["failures"]
    ]
    warnings = {}  # message -> variants, so one line covers them all
    for variant, result in variant_results.items():
        for name, issues in (result.get("portability") or {}).items():
            for issue in issues:
                warnings.setdefault(f"{name} {issue}", []).append(variant)
    return {
        "recipe": recipe,
        "backends": list(backends),
        "smoke": bool(smoke),
        "steps": int(steps),
        "full": bool(full),
        "optimizer": optimizer,
        "learning_rate": (
            LEARNING_RATES[optimizer]
            if learning_rate is None
            else learning_rate
        ),
        "tolerances": dict(TOLERANCES),
        "full_tolerances": full_tolerances or FULL_METRICS,
        "variants": variant_results,
        "workers": workers or {},
        "wall_seconds": wall_seconds,
        "failures": failures,
        "warnings": [
            f"{message} [{', '.join(variants)}]"
            for message, variants in warnings.items()
        ],
        "passed": not failures,
    }


def exit_status(report):
    return 0 if report["passed"] else 1


def format_table(report, verbose=False):
    """One readable table for the recipe (rows = variants), the failures,
    and with `verbose` the per-pair numbers and per-step losses."""
    backends = report["backends"]
    columns = [
        ("variant", None),
        ("forward max|d|", "forward"),
        ("loss max rel", "loss"),
        ("weights max|d|", "weights"),
        ("saved 3x3 max|d|", "saved"),
    ]
    if any(r.get("generate") for r in report["variants"].values()):
        columns.append(("generate 3x3 differing", "generate"))
    if report["full"]:
        columns.append(("full max|d|", "full"))
    columns.append(("result", None))
    rows = []
    for variant, result in report["variants"].items():
        row = [variant]
        for _, check in columns[1:-1]:
            data = result.get(check)
            if data is None:
                row.append("-")
            elif check == "full":
                row.append(f"{data['max']:.4f}")
            elif check == "generate":
                row.append(str(data["max"]))
            else:
                row.append(_fmt(data["max"]))
        row.append("pass" if result["passed"] else "FAIL")
        rows.append(row)
    header = [title for title, _ in columns]
    widths = [
        max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))
    ]

    def line(cells):
        return "  ".join(
            str(c).ljust(w) for c, w in zip(cells, widths)
        ).rstrip()

    settings = (
        f"{'smoke' if report['smoke'] else 'real'} data, "
        f"{report['steps']} {report['optimizer']} steps (lr "
        f"{report['learning_rate']:g}), "
        f"backends {', '.join(backends)}"
    )
    out = [
        f"{report['recipe']}: {settings}",
        line(header),
        line(["-" * w for w in widths]),
    ]
    out += [line(r) for r in rows]
    tol = report["tolerances"]
    out.append(
        f"tolerances: forward {_fmt(tol['forward'])} abs, loss "
        f"{_fmt(tol['loss'])} rel, saved {_fmt(tol['saved'])} abs"
        + (
            ", generated text exact"
            if any(r.get("generate") for r in report["variants"].values())
            else ""
        )
        + (f", full {report.get('full_tolerances')}" if report["full"] else "")
        + "; weights reported (the next step's loss gates each update)"
    )
    if report.get("wall_seconds") is not None:
        out.append(f"wall time: {report['wall_seconds']:.0f} s")
    if verbose:
        for variant, result in report["variants"].items():
            out.append("")
            out.append(f"== {variant}")
            for check in ("forward", "loss", "weights", "full"):
                data = result.get(check)
                if data:
                    pairs = ", ".join(
                        f"{p} {_fmt(d)}" for p, d in data["pairs"].items()
                    )
                    out.append(f"{check}: {pairs}")
            generated = result.get("generate")
            if generated:
                out.append(f"generated (reference): {generated['reference']!r}")
            saved = result.get("saved")
            if saved:
                out.append(
                    f"saved (rows: saved by, columns: loaded by; vs "
                    f"{saved['reference']}):"
                )
                out.append("  " + " ".join(f"{b:>10}" for b in [""] + backends))
                for saver in backends:
                    out.append(
                        "  "
                        + f"{saver:>10} "
                        + " ".join(
                            f"{_fmt(saved['matrix'][saver][b]):>10}"
                            for b in backends
                        )
                    )
            loss = result.get("loss")
            if loss:
                out.append("per-step losses:")
                out.append(
                    "  step "
                    + " ".join(f"{b:>12}" for b in backends)
                    + "      max rel"
                )
                per_step = loss["per_step"]
                for i in range(len(per_step[backends[0]])):
                    values = [per_step[b][i] for b in backends]
                    rel = max(
                        (
                            relative_diffs([x], [y])[0]
                            for x, y in itertools.combinations(values, 2)
                        ),
                        default=0.0,
                    )
                    out.append(
                        f"  {i:>4} "
                        + " ".join(f"{v:>12.8f}" for v in values)
                        + f"  {_fmt(rel):>11}"
                    )
    if report.get("warnings"):
        out.append("")
        out.append("warnings (not gated): saved files tied to one backend")
        out += [f"  {message}" for message in report["warnings"]]
    if report["failures"]:
        out.append("")
        out.append("FAILED checks:")
        out += [f"  {message}" for message in report["failures"]]
    else:
        out.append("all checks passed")
    return "\n".join(out)


def _json_safe(value):
    """Non-finite floats become strings ("inf", "nan"): strict JSON."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        value = float(value)
        return value if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    return value


def write_json_atomic(data, path):
    """Same contract as `zoo.saving.write_json_atomic` (temporary file and an
    atomic rename), without importing zoo (and so Keras) in this process."""
    path = os.path.abspath(path)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    handle, tmp = tempfile.mkstemp(
        dir=directory, prefix=".tmp-", suffix=".json"
    )
    try:
        with os.fdopen(handle, "w") as f:
            json.dump(
                _json_safe(data), f, indent=2, sort_keys=True, allow_nan=False
            )
            f.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return path


# ---- Workers (one fresh process per backend) --------------------------------


class _Aborted(RuntimeError):
    pass


def _atomic_file(path, write):
    """`write(file_object)` into a temporary file, then rename to `path`."""
    handle, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _save_json(data, path):
    _atomic_file(
        path, lambda f: f.write(json.dumps(_json_safe(data), indent=1).encode())
    )


def _save_npz(arrays, path):
    _atomic_file(path, lambda f: np.savez(f, **arrays))


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


def import_recipe(name):
    """The recipe module `recipes.<name>` (also "recipes/<name>.py")."""
    name = os.path.basename(name)
    name = name[:-3] if name.endswith(".py") else name
    name = name[len("recipes.") :] if name.startswith("recipes.") else name
    return importlib.import_module(f"recipes.{name}")


def recipe_variants(module):
    """The recipe's `CHECK_VARIANTS`, else one "default"."""
    variants = getattr(module, "CHECK_VARIANTS", None)
    return list(variants) if variants is not None else ["default"]


def _check_setup(module, variant, smoke, steps, data_dir=None):
    kwargs = {"smoke": smoke, "num_steps": steps}
    if data_dir is not None:
        kwargs["data_dir"] = data_dir
    if variant == "default" and not hasattr(module, "CHECK_VARIANTS"):
        setup = module.check_setup(**kwargs)
    else:
        setup = module.check_setup(variant, **kwargs)
    if not isinstance(setup, CheckSetup):
        raise TypeError(
            f"{module.__name__}.check_setup must return a "
            f"CheckSetup; got {type(setup).__name__}."
        )
    return setup


def _to_numpy(x):
    if hasattr(x, "numpy") and not isinstance(x, np.ndarray):
        try:
            return np.asarray(x.numpy())
        except Exception:  # a backend tensor that needs Keras to convert
            pass
    import keras

    return np.asarray(keras.ops.convert_to_numpy(x))


def _flat_arrays(structure):
    """The arrays of a nested structure (dicts by sorted key), as NumPy."""
    import keras

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
    import keras

    from zoo.saving import save_model_atomic

    known = recipe_variants(module)
    variants = config["variants"] or known
    unknown = [v for v in variants if v not in known]
    if unknown:
        raise SystemExit(
            f"unknown variant(s) {unknown} of recipe "
            f"{config['recipe']}; known: {known}"
        )
    _save_json({"variants": variants}, os.path.join(workdir, "plan.json"))
    for variant in variants:
        start = time.perf_counter()
        vdir = os.path.join(workdir, variant)
        os.makedirs(vdir, exist_ok=True)
        keras.backend.clear_session()
        setup = _check_setup(
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
        _atomic_file(
            os.path.join(vdir, "data.pkl"),
            lambda f, data=data: pickle.dump(data, f),
        )
        _save_json(
            {
                "steps": len(setup.train_batches),
                "parameters": int(model.count_params()),
                "setup_backend": keras.backend.backend(),
            },
            os.path.join(vdir, "setup.json"),
        )  # the "ready" marker
        log(f"{variant}: setup {time.perf_counter() - start:.1f} s")


def _load_data(vdir):
    with open(os.path.join(vdir, "data.pkl"), "rb") as f:
        return pickle.load(f)


def _worker_forward_and_train(config, workdir, variant, backend, log):
    """Re-save, forward pass, SGD steps and trained model of one variant."""
    import keras

    from zoo.saving import save_model_atomic

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
    # this backend (see the module docstring). Plain SGD by default.
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
    _save_npz({"outputs": forward}, os.path.join(out, "forward.npz"))
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
        _save_npz(
            {f"w{i:04d}": _to_numpy(v) for i, v in enumerate(weights)},
            os.path.join(out, "weights.npz"),
        )
        _save_json(
            {"losses": losses, "names": [v.path for v in weights]},
            os.path.join(out, "train.json"),
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
    import keras

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
    _save_npz(arrays, os.path.join(out, "saved.npz"))
    _save_json(matches, os.path.join(out, "preprocessed.json"))
    if data["generate"]:
        _atomic_file(
            os.path.join(out, "generated.pkl"),
            lambda f: pickle.dump(generated, f),
        )
    seconds = time.perf_counter() - start
    log(f"{variant}: saved-model matrix {seconds:.1f} s")
    return seconds


def _worker_full(module, config, workdir, variant, backend, log):
    """The whole recipe, as `python recipes/<recipe>.py` would run it."""
    import keras

    out = os.path.join(workdir, "full", variant, backend)
    if variant == "default":
        argv = []
    elif hasattr(module, "variant_argv"):  # a variant may be several flags
        argv = module.variant_argv(variant)
    else:
        argv = ["--model", variant]
    argv += (["--smoke"] if config["smoke"] else []) + ["--output-dir", out]
    if config.get("data_dir"):
        argv += [
            getattr(module, "CHECK_DATA_FLAG", "--data-dir"),
            config["data_dir"],
        ]
    start = time.perf_counter()
    keras.backend.clear_session()
    module.main(argv)
    seconds = time.perf_counter() - start
    log(f"{variant}: full recipe run {seconds:.1f} s")
    return seconds


def worker_main(backend, workdir):
    start = time.perf_counter()
    with open(os.path.join(workdir, "config.json")) as f:
        config = json.load(f)

    def log(message):  # times from the parent's start, comparable across logs
        print(
            f"[{backend} {time.time() - config['started']:6.1f} s] {message}",
            flush=True,
        )

    log("started")
    import keras

    if keras.backend.backend() != backend:
        raise SystemExit(
            f"KERAS_BACKEND is {keras.backend.backend()!r}, "
            f"expected {backend!r}"
        )
    _configure_precision(backend)
    import zoo  # noqa: F401  (registers zoo's layers for loading)

    if config["root"] not in sys.path:
        sys.path.insert(0, config["root"])
    module = import_recipe(config["recipe"])
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
    _save_json(
        {
            "backend": backend,
            "keras": keras.__version__,
            "framework": _framework_version(backend),
            "seconds": time.perf_counter() - start,
            "timings": timings,
        },
        os.path.join(workdir, f"worker-{backend}.json"),
    )
    log("done")
    return 0


# ---- Orchestration -----------------------------------------------------------


def _run_workers(workdir, backends, timeout, root):
    """Starts one worker per backend, all at once: each one waits for the
    others' saved models, so they must all be alive together (2 cores
    time-share them). Returns {backend: (exit code, seconds)}."""
    logs = os.path.join(workdir, "logs")
    os.makedirs(logs, exist_ok=True)
    procs = {}
    start = time.monotonic()
    for backend in backends:
        log = open(os.path.join(logs, f"{backend}.log"), "w")
        command = python_command(
            "-m",
            "zoo.testing.cross_backend",
            "--worker",
            "--backend",
            backend,
            "--workdir",
            workdir,
        )
        procs[backend] = (
            start_on_backend(command, backend, cwd=root, stdout=log),
            log,
        )
    done = {}
    try:
        while len(done) < len(procs):
            for backend, (proc, log) in procs.items():
                if backend in done or proc.poll() is None:
                    continue
                done[backend] = (proc.returncode, time.monotonic() - start)
                log.close()
                print(
                    f"  {backend} worker "
                    + (
                        "done"
                        if proc.returncode == 0
                        else f"exited with {proc.returncode}"
                    )
                    + f" ({done[backend][1]:.0f} s)",
                    flush=True,
                )
                if proc.returncode != 0:
                    # The others would wait for this one's files forever.
                    open(os.path.join(workdir, ABORT), "w").close()
            if time.monotonic() - start > timeout and len(done) < len(procs):
                open(os.path.join(workdir, ABORT), "w").close()
                for backend, (proc, _) in procs.items():
                    if backend not in done:
                        proc.kill()
            time.sleep(0.25)
    finally:
        for proc, log in procs.values():
            if proc.poll() is None:  # interrupted: stop our own children
                proc.kill()
                proc.wait()
            log.close()
    return done


def _log_tail(workdir, backend, lines=25):
    path = os.path.join(workdir, "logs", f"{backend}.log")
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def collect_raw(
    workdir, variant, backends, *, train, full, full_tolerances=None
):
    """Reads what the workers wrote for one variant (see compare_variant)."""
    vdir = os.path.join(workdir, variant)
    raw = {
        "forward": {},
        "losses": {} if train else None,
        "weights": {} if train else None,
        "saved": {},
        "preprocessed_match": {},
        "generated": None,
        "full": {} if full else None,
        "full_tolerances": full_tolerances,
        "errors": [],
    }

    def missing(what, backend):
        raw["errors"].append(
            f"no {what} from the {backend} worker (see its log)"
        )

    for b in backends:
        out = os.path.join(vdir, b)
        try:
            raw["forward"][b] = np.load(os.path.join(out, "forward.npz"))[
                "outputs"
            ]
        except OSError:
            missing("forward outputs", b)
        if train:
            try:
                with open(os.path.join(out, "train.json")) as f:
                    trained = json.load(f)
                stored = np.load(os.path.join(out, "weights.npz"))
                raw["losses"][b] = trained["losses"]
                # By path: backends may list the same weights in other
                # orders (a functional model under PyTorch tracks the
                # layers used outside its graph after the graph's own).
                raw["weights"][b] = {
                    name: stored[f"w{i:04d}"]
                    for i, name in enumerate(_unique(trained["names"]))
                }
            except OSError:
                missing("training results", b)
        try:
            stored = np.load(os.path.join(out, "saved.npz"))
            raw["saved"][b] = {s: stored[s] for s in stored.files}
            with open(os.path.join(out, "preprocessed.json")) as f:
                raw["preprocessed_match"][b] = json.load(f)
        except OSError:
            missing("saved-model predictions", b)
        generated = os.path.join(out, "generated.pkl")
        if os.path.exists(generated):
            with open(generated, "rb") as f:
                raw["generated"] = raw["generated"] or {}
                raw["generated"][b] = pickle.load(f)
        if full:
            path = os.path.join(workdir, "full", variant, b, "metrics.json")
            try:
                with open(path) as f:
                    raw["full"][b] = json.load(f)
            except OSError:
                missing("full-run metrics.json", b)
    return raw


def run_check(
    recipe,
    *,
    variants=None,
    smoke=False,
    data_dir=None,
    steps=20,
    optimizer="sgd",
    learning_rate=None,
    full=False,
    backends=BACKENDS,
    json_path=None,
    verbose=False,
    workdir=None,
    timeout=WAIT_TIMEOUT,
    root=None,
):
    """Runs the check of `recipe` (a module name in `recipes/`) and prints
    and returns its report.

    Args:
        recipe: e.g. "imdb_attention" or "gpt_text".
        variants: names among the recipe's `CHECK_VARIANTS` (default all).
        smoke: the recipe's small generated data.
        data_dir: a local copy of the recipe's data.
        steps: training steps compared (0: none).
        optimizer: "sgd" (the check) or "adam" (shows optimizer-specific
            divergence).
        learning_rate: default `LEARNING_RATES[optimizer]`.
        full: also run the whole recipe under every backend.
        backends: the first is the reference and makes the initial model.
        json_path: also write the report there (atomically).
        verbose: per-pair numbers and per-step losses in the printout.
        workdir: keep the models and arrays there (default: a temporary
            directory, removed afterwards).
        timeout: seconds before the workers are stopped.
        root: the repository root holding `recipes/` (default: the current
            directory).

    Returns:
        The report dict; `report["passed"]` says whether every check passed.
    """
    start = time.perf_counter()
    root = os.path.abspath(root or os.getcwd())
    keep = workdir is not None
    workdir = os.path.abspath(
        workdir or tempfile.mkdtemp(prefix="check_backends-")
    )
    if keep and os.path.exists(workdir):
        shutil.rmtree(workdir)  # stale files would pass for fresh ones
    os.makedirs(workdir, exist_ok=True)
    backends = list(backends)
    if learning_rate is None:
        learning_rate = LEARNING_RATES[optimizer]
    config = {
        "recipe": recipe,
        "variants": variants,
        "smoke": smoke,
        "steps": steps,
        "full": full,
        "data_dir": os.path.abspath(data_dir) if data_dir else None,
        "optimizer": optimizer,
        "learning_rate": learning_rate,
        "backends": backends,
        "started": time.time(),
        "root": root,
    }
    write_json_atomic(config, os.path.join(workdir, "config.json"))
    print(
        f"check_backends: {recipe} on {', '.join(backends)}"
        + (f" (workdir {workdir})" if keep else ""),
        flush=True,
    )
    if root not in sys.path:
        sys.path.insert(0, root)
    full_tolerances = getattr(
        import_recipe(recipe), "CHECK_FULL_METRICS", FULL_METRICS
    )
    try:
        done = _run_workers(workdir, backends, timeout, root)
        workers = {}
        for backend in backends:
            code, seconds = done.get(backend, (None, None))
            workers[backend] = {"exit_code": code, "seconds": seconds}
            info = os.path.join(workdir, f"worker-{backend}.json")
            if os.path.exists(info):
                with open(info) as f:
                    workers[backend].update(json.load(f))
        errors = []
        for backend in backends:
            code = workers[backend]["exit_code"]
            if code == 3:  # stopped because another worker failed
                errors.append(f"worker {backend} aborted")
            elif code != 0:
                errors.append(f"worker {backend} exited with {code}")
                print(
                    f"\n--- {backend} worker failed (exit {code}); end of "
                    f"its log:\n{_log_tail(workdir, backend)}",
                    flush=True,
                )
        plan = os.path.join(workdir, "plan.json")
        if os.path.exists(plan):
            with open(plan) as f:
                variants = json.load(f)["variants"]
        else:
            variants = variants or []
        results = {}
        for variant in variants:
            raw = collect_raw(
                workdir,
                variant,
                backends,
                train=steps > 0,
                full=full,
                full_tolerances=full_tolerances,
            )
            results[variant] = compare_variant(raw, backends)
            results[variant]["portability"] = {
                f"saved-{b}.keras": scan_saved_model(path)
                for b in backends
                for path in [os.path.join(workdir, variant, f"saved-{b}.keras")]
                if os.path.exists(path)
            }
        report = build_report(
            recipe,
            results,
            backends,
            smoke=smoke,
            steps=steps,
            full=full,
            optimizer=optimizer,
            learning_rate=learning_rate,
            wall_seconds=time.perf_counter() - start,
            workers=workers,
            full_tolerances=full_tolerances,
        )
        report["failures"] = errors + report["failures"]
        report["passed"] = not report["failures"] and bool(variants)
        if not variants:
            report["failures"].append("no variant was checked")
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(format_table(report, verbose=verbose), flush=True)
    if json_path:
        write_json_atomic(report, json_path)
    return report


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


if __name__ == "__main__":
    # Run as the imported module, not as __main__, so that the CheckSetup a
    # recipe builds is this module's class.
    from zoo.testing import cross_backend

    sys.exit(cross_backend.main())

"""The comparisons of the cross-backend check, pure NumPy: the workers'
raw results in, every check's numbers, pass or fail and failure messages
out. The tolerances and why they are what they are: docs/backends.md."""

import itertools
import json
import math
import zipfile

import numpy as np

TOLERANCES = {
    "forward": 1e-5,  # max abs difference of the outputs, float32
    "loss": 1e-4,  # max relative difference of the per-step losses
    "weights": None,  # reported; the next step's loss gates each update
    "saved": 1e-5,  # max abs difference, saved-model 3x3 matrix
}
FULL_METRICS = {"validation_accuracy": 0.01, "test_accuracy": 0.01}
# Plain SGD, no momentum: deterministic, linear in the gradient and free of
# optimizer epsilons (see docs/backends.md); 0.1 moves the weights enough to
# matter in 20 steps. Adam is there to diagnose, not the default.
OPTIMIZERS = ("sgd", "adam")
LEARNING_RATES = {"sgd": 0.1, "adam": 0.01}
CHECKS = ("forward", "loss", "weights", "saved", "generate", "full")


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


def format_number(value):
    """A difference as the report prints it: "1.2e-07", "inf", "-" (None)."""
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
        f"forward: {p} max abs diff {format_number(d)} > {format_number(tolerance)}"
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
        f"loss: {p} max rel diff {format_number(d)} > {format_number(tolerance)} "
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
        f"weights: {p} max abs diff {format_number(d)} > {format_number(tolerance)} ({where[p]})"
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


def unique_paths(names):
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
        f"{ref}: max abs diff {format_number(d)} > {format_number(tolerance)}"
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
    with zipfile.ZipFile(path) as archive:
        return portability_issues(json.loads(archive.read("config.json")))


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

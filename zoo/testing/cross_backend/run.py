"""Runs the cross-backend check: starts one worker process per backend,
reads what they wrote, compares it and reports (this process imports no
hook and runs no model)."""

import json
import os
import pickle
import shutil
import tempfile
import time

import numpy as np

from zoo.saving import write_json_atomic
from zoo.testing.backends import BACKENDS, python_command, start_on_backend
from zoo.testing.cross_backend.compare import (
    LEARNING_RATES,
    compare_variant,
    scan_saved_model,
    unique_paths,
)
from zoo.testing.cross_backend.report import build_report, format_table
from zoo.testing.cross_backend.worker import ABORT, WAIT_TIMEOUT


def _run_workers(workdir, backends, timeout, cwd):
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
            start_on_backend(command, backend, cwd=cwd, stdout=log),
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
                    for i, name in enumerate(unique_paths(trained["names"]))
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
    hook,
    *,
    name=None,
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
    cwd=None,
):
    """Runs the check of the model that `hook` sets up, prints its table
    and returns its report.

    Args:
        hook: the path of a Python file defining `check_setup` (see
            `zoo.testing.cross_backend.hook`), e.g. "recipes/gpt_text.py".
            Only the workers import it.
        name: what the report calls it (default: the file's name without
            ".py").
        variants: names among the hook's `CHECK_VARIANTS` (default all).
        smoke: passed to `check_setup` (the recipes' small generated data).
        data_dir: a local copy of the data, passed to `check_setup` and, for
            `full`, to `main` under the hook's `CHECK_DATA_FLAG`.
        steps: training steps compared (0: none).
        optimizer: "sgd" (the check) or "adam" (shows optimizer-specific
            divergence).
        learning_rate: default `LEARNING_RATES[optimizer]`.
        full: also run the hook's `main` under every backend and compare
            the metrics it writes.
        backends: the first is the reference and makes the initial model.
        json_path: also write the report there (strict JSON, atomically).
        verbose: per-pair numbers and per-step losses in the printout.
        workdir: keep the models and arrays there (default: a temporary
            directory, removed afterwards).
        timeout: seconds before the workers are stopped.
        cwd: the workers' working directory (default: the current one);
            `python -m zoo.testing.cross_backend` there must import this
            zoo.

    Returns:
        The report dict; `report["passed"]` says whether every check passed.
    """
    start = time.perf_counter()
    hook = os.path.abspath(hook)
    if not os.path.isfile(hook):
        raise FileNotFoundError(f"no hook file {hook}")
    name = name or os.path.splitext(os.path.basename(hook))[0]
    cwd = os.path.abspath(cwd or os.getcwd())
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
        "hook": hook,
        "recipe": name,
        "variants": variants,
        "smoke": smoke,
        "steps": steps,
        "full": full,
        "data_dir": os.path.abspath(data_dir) if data_dir else None,
        "optimizer": optimizer,
        "learning_rate": learning_rate,
        "backends": backends,
        "started": time.time(),
    }
    write_json_atomic(config, os.path.join(workdir, "config.json"))
    print(
        f"check_backends: {name} on {', '.join(backends)}"
        + (f" (workdir {workdir})" if keep else ""),
        flush=True,
    )
    try:
        done = _run_workers(workdir, backends, timeout, cwd)
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
        # The first worker's plan: the variants it set up and the hook's
        # tolerances for `full`.
        plan = {"variants": [], "full_metrics": None}
        if os.path.exists(os.path.join(workdir, "plan.json")):
            with open(os.path.join(workdir, "plan.json")) as f:
                plan = json.load(f)
        variants = plan["variants"]
        full_tolerances = plan["full_metrics"]
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
            name,
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
        write_json_atomic(report, json_path, strict=True)
    return report

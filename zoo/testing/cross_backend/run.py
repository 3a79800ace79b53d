"""Runs the cross-backend check of one or several recipes: starts one
worker process per backend (each checks every recipe in turn), reads what
they wrote, compares it and reports (this process imports no hook and runs
no model)."""

import json
import os
import pickle
import re
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
from zoo.testing.cross_backend.report import (
    build_report,
    format_table,
    summary_line,
)
from zoo.testing.cross_backend.worker import ABORT, CHECKS, WAIT_TIMEOUT


def _unfinished(workdir, recipes, backend):
    """Whether `backend`'s worker left a recipe without its status file."""
    return any(
        not os.path.exists(os.path.join(workdir, r, f"worker-{backend}.json"))
        for r in recipes
    )


def _run_workers(workdir, recipes, backends, timeout, cwd):
    """Starts one worker per backend, all at once: each one waits for the
    others' saved models, so they must all be alive together (2 cores
    time-share them). A worker that ends before it has finished every
    recipe (a crash) makes the others stop waiting. Returns {backend:
    (exit code, seconds)}."""
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
                if _unfinished(workdir, recipes, backend):
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


def _log_tail(folder, backend, lines=25):
    """The end of `<folder>/logs/<backend>.log` (a recipe's folder: the
    worker's output on that recipe; the workdir: its output outside any)."""
    path = os.path.join(folder, "logs", f"{backend}.log")
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return "(no log)"


def collect_raw(rdir, variant, backends, *, train, full, full_tolerances=None):
    """Reads what the workers wrote for one variant in the recipe folder
    `rdir` (see compare_variant)."""
    vdir = os.path.join(rdir, variant)
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
            path = os.path.join(rdir, "full", variant, b, "metrics.json")
            try:
                with open(path) as f:
                    raw["full"][b] = json.load(f)
            except OSError:
                missing("full-run metrics.json", b)
    return raw


def _recipe_report(workdir, recipe, backends, done, settings, shown):
    """The report of one recipe of the run, from its folder; prints the end
    of the log of each worker that failed on it (`shown`: the backends whose
    log outside any recipe is already printed)."""
    rdir = os.path.join(workdir, recipe)
    workers = {}
    for backend in backends:
        code, seconds = done.get(backend, (None, None))
        workers[backend] = {"exit_code": code, "seconds": seconds}
        info = os.path.join(rdir, f"worker-{backend}.json")
        if os.path.exists(info):
            with open(info) as f:
                workers[backend].update(json.load(f))
    errors = []
    for backend in backends:
        status = workers[backend].get("status")
        if status == "done":
            continue
        if status == "aborted":  # another worker failed this recipe
            errors.append(f"worker {backend} aborted")
            continue
        if status == "failed":
            errors.append(
                f"worker {backend} failed: {workers[backend]['error']}"
            )
            what = f"failed on {recipe}"
            folder = rdir
        else:  # its process ended before it finished this recipe
            code = workers[backend]["exit_code"]
            errors.append(f"worker {backend} exited with {code}")
            what = f"exited with {code} before it finished {recipe}"
            folder = rdir
            if not os.path.exists(os.path.join(rdir, "logs", f"{backend}.log")):
                if backend in shown:
                    continue
                shown.add(backend)
                folder = workdir
        print(
            f"\n--- {backend} worker {what}; end of its log:\n"
            f"{_log_tail(folder, backend)}",
            flush=True,
        )
    # The first worker's plan: the variants it set up and the hook's
    # tolerances for `full`.
    plan = {"variants": [], "full_metrics": None}
    if os.path.exists(os.path.join(rdir, "plan.json")):
        with open(os.path.join(rdir, "plan.json")) as f:
            plan = json.load(f)
    variants = plan["variants"]
    full_tolerances = plan["full_metrics"]
    results = {}
    for variant in variants:
        raw = collect_raw(
            rdir,
            variant,
            backends,
            train=settings["steps"] > 0,
            full=settings["full"],
            full_tolerances=full_tolerances,
        )
        results[variant] = compare_variant(raw, backends)
        results[variant]["portability"] = {
            f"saved-{b}.keras": scan_saved_model(path)
            for b in backends
            for path in [os.path.join(rdir, variant, f"saved-{b}.keras")]
            if os.path.exists(path)
        }
    spans = [
        (w["started"], w["finished"])
        for w in workers.values()
        if "started" in w
    ]
    report = build_report(
        recipe,
        results,
        backends,
        **settings,
        # The span of this recipe in the workers (run_checks gives a run
        # of one recipe its whole wall time).
        wall_seconds=(
            max(end for _, end in spans) - min(begin for begin, _ in spans)
            if spans
            else None
        ),
        workers=workers,
        full_tolerances=full_tolerances,
    )
    report["failures"] = errors + report["failures"]
    report["passed"] = not report["failures"] and bool(variants)
    if not variants:
        report["failures"].append("no variant was checked")
    return report


def run_checks(
    hooks,
    *,
    names=None,
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
    """Runs the checks of the models that `hooks` set up with one worker
    process per backend, which checks them one after the other; prints each
    one's table (then, for several, one line for the run) and returns their
    reports.

    Args:
        hooks: paths of Python files defining `check_setup` (see
            `zoo.testing.cross_backend.hook`), e.g. "recipes/gpt_text.py".
            Only the workers import them.
        names: what the reports call them, one per hook, distinct (default:
            the files' names without ".py"); each also names the hook's
            folder in `workdir`.
        variants: one entry per hook: names among its `CHECK_VARIANTS`, or
            None for all (default: all for every hook).
        smoke: passed to every `check_setup` (the recipes' small generated
            data).
        data_dir: a local copy of the data, passed to every `check_setup`
            and, for `full`, to `main` under the hook's `CHECK_DATA_FLAG`.
        steps: training steps compared (0: none).
        optimizer: "sgd" (the check) or "adam" (shows optimizer-specific
            divergence).
        learning_rate: default `LEARNING_RATES[optimizer]`.
        full: also run each hook's `main` under every backend and compare
            the metrics it writes.
        backends: the first is the reference and makes the initial models.
        json_path: also write `{name: report}` there (strict JSON, keys
            sorted, atomically).
        verbose: per-pair numbers and per-step losses in the printout.
        workdir: keep the models and arrays there, one folder per hook
            (default: a temporary directory, removed afterwards).
        timeout: seconds before the workers are stopped (the whole run's).
        cwd: the workers' working directory (default: the current one);
            `python -m zoo.testing.cross_backend` there must import this
            zoo.

    Returns:
        The reports, in the order of `hooks`; `report["passed"]` says
        whether every check of that hook passed. A report's `wall_seconds`
        is the run's wall time when it checked one hook, else the time from
        the first worker starting that hook to the last one finishing it.

    Raises:
        FileNotFoundError: a hook file is missing.
        ValueError: no hook, names that repeat or are no plain folder name,
            or `names` or `variants` of another length than `hooks`.
    """
    start = time.perf_counter()
    hooks = [os.path.abspath(hook) for hook in hooks]
    if not hooks:
        raise ValueError("run_checks needs at least one hook file")
    for hook in hooks:
        if not os.path.isfile(hook):
            raise FileNotFoundError(f"no hook file {hook}")
    names = list(names or [None] * len(hooks))
    variants = list(variants or [None] * len(hooks))
    if len(names) != len(hooks) or len(variants) != len(hooks):
        raise ValueError(
            f"names and variants take one entry per hook ({len(hooks)}); "
            f"got {len(names)} and {len(variants)}"
        )
    names = [
        name or os.path.splitext(os.path.basename(hook))[0]
        for name, hook in zip(names, hooks)
    ]
    for name in names:
        if not re.fullmatch(r"\w[\w-]*", name) or name in (ABORT, "logs"):
            raise ValueError(f"{name!r} cannot name a check's folder")
    if len(set(names)) != len(names):
        raise ValueError(f"the checks' names repeat: {', '.join(names)}")
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
    started = time.time()
    for hook, name, chosen in zip(hooks, names, variants):
        config = {
            "hook": hook,
            "recipe": name,
            "variants": chosen,
            "smoke": smoke,
            "steps": steps,
            "full": full,
            "data_dir": os.path.abspath(data_dir) if data_dir else None,
            "optimizer": optimizer,
            "learning_rate": learning_rate,
            "backends": backends,
            "started": started,
        }
        rdir = os.path.join(workdir, name)
        os.makedirs(rdir)
        write_json_atomic(config, os.path.join(rdir, "config.json"))
    write_json_atomic(
        {"recipes": names, "backends": backends, "started": started},
        os.path.join(workdir, CHECKS),
    )
    print(
        f"check_backends: {', '.join(names)} on {', '.join(backends)}"
        + (f" (workdir {workdir})" if keep else ""),
        flush=True,
    )
    settings = dict(
        smoke=smoke,
        steps=steps,
        full=full,
        optimizer=optimizer,
        learning_rate=learning_rate,
    )
    try:
        done = _run_workers(workdir, names, backends, timeout, cwd)
        shown = set()
        reports = [
            _recipe_report(workdir, name, backends, done, settings, shown)
            for name in names
        ]
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    wall_seconds = time.perf_counter() - start
    if len(reports) == 1:
        reports[0]["wall_seconds"] = wall_seconds
    print(
        "\n\n".join(format_table(r, verbose=verbose) for r in reports),
        flush=True,
    )
    if len(reports) > 1:
        print("\n" + summary_line(reports, wall_seconds), flush=True)
    if json_path:
        write_json_atomic(
            {report["recipe"]: report for report in reports},
            json_path,
            strict=True,
        )
    return reports


def run_check(hook, *, name=None, variants=None, json_path=None, **options):
    """Runs the check of the model that `hook` sets up, prints its table
    and returns its report: `run_checks([hook], ...)[0]`.

    Args:
        hook: the path of a Python file defining `check_setup`, e.g.
            "recipes/gpt_text.py".
        name: what the report calls it (default: the file's name without
            ".py").
        variants: names among the hook's `CHECK_VARIANTS` (default all).
        json_path: also write the report there (strict JSON, atomically).
        **options: the other keyword arguments of `run_checks` (`smoke`,
            `data_dir`, `steps`, `optimizer`, `learning_rate`, `full`,
            `backends`, `verbose`, `workdir`, `timeout`, `cwd`).

    Returns:
        The report dict; `report["passed"]` says whether every check passed.
    """
    (report,) = run_checks([hook], names=[name], variants=[variants], **options)
    if json_path:
        write_json_atomic(report, json_path, strict=True)
    return report

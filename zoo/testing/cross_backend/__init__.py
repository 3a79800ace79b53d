"""Do JAX, TensorFlow and PyTorch agree on a model? The cross-backend check,
with a command line for the recipes in `recipes/check_backends.py`:

    report = run_check("recipes/gpt_text.py", smoke=True, steps=3)
    exit_status(report)  # 0 when every check passed
    reports = run_checks(
        ["recipes/gpt_text.py", "recipes/translate.py"],
        variants=[None, ["rnn"]],
        smoke=True,
        steps=3,
    )
    exit_status(reports)  # 0 when every check of every recipe passed

`run_checks` starts one fresh worker process per backend, all at once
(`python -m zoo.testing.cross_backend --worker`, with `KERAS_BACKEND` set
in its environment before Keras is imported), which checks the hooks one
after the other, so each framework is imported once for all of them; the
calling process only orchestrates and compares (`run_check(hook, ...)` is
`run_checks([hook], ...)[0]`). For each hook, the first backend's worker
calls the hook's `check_setup` and saves the model once (initial weights,
preprocessor and vocabulary); every backend loads that file, runs the same
batch forward, takes `steps` plain-SGD steps on the same batches and
re-saves the model; every backend then loads every backend's saved model
(3 x 3) and compares predictions, the preprocessor's arrays and, when the
setup asks, generated text; `full=True` also runs the hook's whole `main`
under every backend and compares its metrics. The report gates forward
outputs (1e-5 absolute), per-step losses (1e-4 relative), the saved-model
matrix (1e-5 absolute), the preprocessed arrays and generated text
(exact). A hook that fails on one backend fails its own report; the
others are still checked.

The hook is a Python file that the caller names by its path; every worker
imports it from there (`hook.load_hook`), so this package imports no
caller's code. It defines

    check_setup(variant, smoke=True, seed=1337, num_steps=20, data_dir=None)
        -> CheckSetup

(no `variant` when it has no `CHECK_VARIANTS`) and optionally
`CHECK_VARIANTS`, `CHECK_FULL_METRICS`, `CHECK_DATA_FLAG`,
`variant_argv(variant)` and `main(argv)`: see
`zoo.testing.cross_backend.hook`.

Modules: `compare` (the comparisons, pure NumPy), `report` (the report,
its table and exit status), `worker` (one backend's process), `run`
(`run_checks`, `run_check`), `hook` (the plugin interface). What is
compared, how, why the tolerances are what they are and the known sources
of divergence between the backends: docs/backends.md.
"""

from zoo.testing.backends import BACKENDS
from zoo.testing.cross_backend.compare import (
    CHECKS,
    FULL_METRICS,
    LEARNING_RATES,
    OPTIMIZERS,
    TOLERANCES,
    compare_forward,
    compare_full,
    compare_generations,
    compare_losses,
    compare_saved,
    compare_variant,
    compare_weights,
    format_number,
    max_abs_diff,
    pair_name,
    portability_issues,
    relative_diffs,
    scan_saved_model,
    unique_paths,
)
from zoo.testing.cross_backend.hook import (
    CheckSetup,
    load_hook,
    recipe_variants,
)
from zoo.testing.cross_backend.report import (
    build_report,
    exit_status,
    format_table,
    summary_line,
)
from zoo.testing.cross_backend.run import collect_raw, run_check, run_checks
from zoo.testing.cross_backend.worker import (
    ABORT,
    WAIT_TIMEOUT,
    worker_main,
)

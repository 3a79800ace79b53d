"""The hook through which a model plugs into the cross-backend check: a
Python file that the caller of `run_checks` names by its path, and that
every worker imports from there (it need not be part of any package).

It defines

    check_setup(variant, smoke=True, seed=1337, num_steps=20, data_dir=None)
        -> CheckSetup

(without `variant` when the file has no `CHECK_VARIANTS`), and may define
`CHECK_VARIANTS` (names; default one "default"), `CHECK_FULL_METRICS`
(`{metrics.json key: tolerance}` for `full=True`; default `FULL_METRICS`),
`CHECK_DATA_FLAG` (how its `main` takes a local data path; default
"--data-dir"), `variant_argv(variant)` (the command-line flags of a variant
for `full=True`; default `["--model", variant]`) and `main(argv)` (the whole
run, for `full=True`, writing `metrics.json` to `--output-dir`).

The file is imported as it stands, as a top-level module of its own (not
as part of a package), so its imports resolve from `sys.path` as they are:
the recipes in `recipes/` import only `zoo` and installed packages.
"""

import dataclasses
import importlib.util
import os
import re
import sys
from typing import Any

from zoo.testing.cross_backend.compare import FULL_METRICS


@dataclasses.dataclass
class CheckSetup:
    """What a hook's `check_setup` hands the cross-backend check.

    Args:
        model: the task with fresh weights and dropout off, preprocessor
            included (keras-hub's `Task`s: `predict_on_batch` and
            `train_on_batch` take raw inputs).
        inputs: one batch in the form the task's `predict` takes: raw
            strings, float or uint8 images, int ids, or a dict of them.
        train_batches: `num_steps` pairs `(x, y)` in that form (`y` may be
            None when the preprocessor makes the targets, as a causal LM's
            does), chosen in a NumPy-seeded order.
        loss: the training loss (None: the task's default).
        generate: optional keyword arguments of `model.generate` (greedy by
            default), compared as exact text (or ids); with `"method"`, the
            name of another generating method to call with the rest
            (ImageGPT's `complete`: images out, compared exactly).
    """

    model: Any
    inputs: Any
    train_batches: list
    loss: Any = None
    generate: dict = None


def load_hook(path):
    """The hook module at `path`, imported from that file.

    It is registered in `sys.modules` under a name made from its file name
    ("_cross_backend_hook_gpt_text" for ".../gpt_text.py"), the same in
    every worker, so that objects of its classes unpickle in each of them;
    a second call with the same path returns the same module.

    Args:
        path: a Python file defining `check_setup` (see the module
            docstring).

    Returns:
        The module.

    Raises:
        FileNotFoundError: no such file.
    """
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no hook file {path}")
    stem = os.path.splitext(os.path.basename(path))[0]
    name = "_cross_backend_hook_" + re.sub(r"\W", "_", stem)
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == path:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def recipe_variants(module):
    """The hook's `CHECK_VARIANTS`, else one "default"."""
    variants = getattr(module, "CHECK_VARIANTS", None)
    return list(variants) if variants is not None else ["default"]


def full_metrics(module):
    """The hook's `CHECK_FULL_METRICS`, else `FULL_METRICS`."""
    return dict(getattr(module, "CHECK_FULL_METRICS", FULL_METRICS))


def call_check_setup(module, variant, smoke, steps, data_dir=None):
    """`module.check_setup` for `variant`, checked to return a
    `CheckSetup`."""
    kwargs = {"smoke": smoke, "num_steps": steps}
    if data_dir is not None:
        kwargs["data_dir"] = data_dir
    if variant == "default" and not hasattr(module, "CHECK_VARIANTS"):
        setup = module.check_setup(**kwargs)
    else:
        setup = module.check_setup(variant, **kwargs)
    if not isinstance(setup, CheckSetup):
        raise TypeError(
            f"check_setup of {module.__file__} must return a CheckSetup; "
            f"got {type(setup).__name__}."
        )
    return setup


def full_argv(module, variant, smoke, output_dir, data_dir=None):
    """The arguments of `module.main` for the whole run of `variant`."""
    if variant == "default":
        argv = []
    elif hasattr(module, "variant_argv"):  # a variant may be several flags
        argv = list(module.variant_argv(variant))
    else:
        argv = ["--model", variant]
    argv += (["--smoke"] if smoke else []) + ["--output-dir", output_dir]
    if data_dir:
        argv += [getattr(module, "CHECK_DATA_FLAG", "--data-dir"), data_dir]
    return argv

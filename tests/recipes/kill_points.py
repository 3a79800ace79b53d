"""Kills a recipe's run at a chosen point with a real signal, as a crash, an
out-of-memory killer or a cluster's scheduler would (docs/testing.md).

`run_killed(recipe, argv, point, signum)` runs `recipe.main(argv)` in a
child process that sends itself `signum` (SIGTERM or SIGKILL) at `point`:

- "backup": during the second backup's write (`BackupUntilDone`, epoch
  2): the weights file it is writing is cut to half its size, then the
  signal. The first epoch's backup is the last whole one.
- "before_save": after `fit` has returned, as the recipe calls
  `save_model_atomic` for its model file: nothing of it written yet.
- "mid_save": during that save, the `.keras` file written under its
  temporary name and cut to half, before the rename.

The point is armed by patching, in the child only, what the recipe calls
(`keras.Model.save_weights`, the recipe module's `save_model_atomic`,
`zoo.saving._publish`): nothing in `zoo` or the recipes knows about it.

The children are forked from a `multiprocessing` fork server that has
imported Keras, `zoo` and the recipes once, so a kill test pays the
imports (tens of seconds on a loaded machine) once per session, not once
per test. No framework op runs in the server before it forks.
"""

import importlib
import multiprocessing
import os
import signal
import sys
import time

POINTS = ("backup", "before_save", "mid_save")
RECIPES = ("recipes.gpt_text", "recipes.translate", "recipes.caption_images")


def _context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["zoo", *RECIPES, __name__])
    return context


def run_killed(recipe, argv, point, signum, log, timeout=300):
    """Runs `recipe.main(argv)` (`recipe` a module name of `RECIPES`) in a
    child process killed by `signum` at `point`; returns when it is dead.
    The child's output goes to the file `log`.

    Raises:
        AssertionError: the child ended otherwise (finished, raised, or
            died of another signal), or outlived `timeout` seconds.
    """
    if point not in POINTS:
        raise ValueError(f"point must be one of {POINTS}; got {point!r}.")
    log = os.fspath(log)
    child = _context().Process(
        target=_run, args=(recipe, list(argv), point, int(signum), log)
    )
    child.start()
    child.join(timeout)
    if child.is_alive():
        child.kill()
        child.join()
    if child.exitcode != -signum:
        with open(log, errors="replace") as f:
            tail = f.read()[-3000:]
        raise AssertionError(
            f"{recipe} at {point}: exit code {child.exitcode}, not "
            f"-{signum} (it finished, failed or hung before the point); "
            f"its output ends:\n{tail}"
        )


def _die(signum):
    os.kill(os.getpid(), signum)
    time.sleep(60)  # the signal ends the process before this returns
    raise AssertionError(f"signal {signum} did not end the process")


def _cut_to_half(path):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def _arm(module, point, signum):
    if point == "backup":
        import keras

        save_weights = keras.Model.save_weights
        backups = []

        def cut_backup(model, filepath, *args, **kwargs):
            save_weights(model, filepath, *args, **kwargs)
            path = os.path.abspath(filepath)
            if os.path.basename(os.path.dirname(path)) == "backup":
                backups.append(path)
                if len(backups) == 2:
                    _cut_to_half(path)
                    _die(signum)

        keras.Model.save_weights = cut_backup
    elif point == "before_save":

        def killed_before_saving(*args, **kwargs):
            _die(signum)

        module.save_model_atomic = killed_before_saving
    else:
        from zoo import saving

        publish = saving._publish

        def cut_model_file(tmp, path):
            if path.endswith(".keras"):
                _cut_to_half(tmp)
                _die(signum)
            publish(tmp, path)

        saving._publish = cut_model_file


def _run(recipe, argv, point, signum, log):
    with open(log, "w") as f:  # the child's output, C and C++ writers too
        for stream in (1, 2):
            os.dup2(f.fileno(), stream)
    sys.stdout.reconfigure(line_buffering=True)  # what it printed, kept
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    module = importlib.import_module(recipe)
    _arm(module, point, signum)
    module.main(argv)

"""Keras callbacks used by the recipes."""

import csv
import hashlib
import importlib
import json
import os
import random
import shutil
import time
import warnings

import keras
import numpy as np

from zoo.layers import attention_entropy
from zoo.saving import (
    atomic_path,
    remove_temporaries,
    save_weights_atomic,
    write_json_atomic,
)


class AttentionEntropyHistory(keras.callbacks.Callback):
    """Records the entropy of attention weights on fixed inputs every epoch.

    Args:
        weights_model: a model from token ids to attention weights
            `(batch, seq)` (see `zoo.models.attention_model`).
        token_ids: `(n, seq)` word ids, 0 = padding.

    After training, `entropies[epoch]` is an `(n,)` array of entropies in
    nats and `max_entropies` the entropy of uniform attention, log(length).
    """

    def __init__(self, weights_model, token_ids):
        super().__init__()
        self.weights_model = weights_model
        self.token_ids = np.asarray(token_ids)
        lengths = np.maximum((self.token_ids != 0).sum(axis=1), 1)
        self.max_entropies = np.log(lengths)
        self.entropies = {}

    def on_epoch_end(self, epoch, logs=None):
        weights = self.weights_model.predict(self.token_ids, verbose=0)
        entropy = attention_entropy(weights, self.token_ids != 0)
        self.entropies[epoch + 1] = keras.ops.convert_to_numpy(entropy)


class ReproducibleEpochs(keras.callbacks.Callback):
    """Makes each epoch's randomness a function of `(seed, epoch)`, so a run
    resumed at epoch `e` (with `keras.callbacks.BackupAndRestore`) continues
    exactly as the uninterrupted run would have.

    At the start of every epoch it sets `.epoch` on each of `datasets` (e.g.
    `zoo.data.masked_lm.MaskedLMBatches`, whose order and masks follow it)
    and reseeds every `keras.random.SeedGenerator` of the model (dropout's),
    whose state `BackupAndRestore` does not save, and the global generators:
    Python's and NumPy's, and under PyTorch torch's (unseeded dropout there
    draws from it). Not TensorFlow's global seed: setting it clears
    TensorFlow's kernel cache, so every compiled function would be
    optimised again at each epoch (and the resources of tf.data ops, such
    as a SentencePiece tokenizer's, are gone), and no random op of a Keras
    model reads it (they take their seeds from the model's
    `SeedGenerator`s).

    Args:
        seed: the run's seed.
        datasets: objects with an `epoch` attribute to keep in step.

    Example (the BERT recipe passes its `zoo.data.masked_lm.MaskedLMBatches`;
    any object with an `epoch` attribute follows):

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dropout(0.5),
    ...                           keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((8, 2)), np.ones((8, 1))
    >>> class Batches:
    ...     epoch = None
    >>> batches = Batches()
    >>> _ = model.fit(x, y, epochs=3, verbose=0, callbacks=[
    ...     ReproducibleEpochs(1, [batches]),
    ...     keras.callbacks.BackupAndRestore("runs/backup")])
    >>> batches.epoch  # the last epoch's, counted from 0
    2
    """

    def __init__(self, seed, datasets=()):
        super().__init__()
        self.seed = int(seed)
        self.datasets = list(datasets)

    def on_epoch_begin(self, epoch, logs=None):
        for dataset in self.datasets:
            dataset.epoch = int(epoch)
        seed = int(
            np.random.default_rng([self.seed, int(epoch)]).integers(
                0, 2**31 - 1
            )
        )
        random.seed(seed)
        np.random.seed(seed)
        if keras.backend.backend() == "torch":
            # What keras.utils.set_random_seed does for PyTorch, without
            # TensorFlow's seed (see above; it also frees the resources of
            # tf.data ops such as a SentencePiece tokenizer's).
            importlib.import_module("torch").manual_seed(seed)
        states = [
            v for v in self.model.variables if v.name == "seed_generator_state"
        ]
        for index, state in enumerate(states):
            value = np.random.default_rng(
                [self.seed, int(epoch), index]
            ).integers(0, 2**31 - 1)
            state.assign(
                keras.ops.convert_to_tensor([value, 0], dtype=state.dtype)
            )


class StopAfterMinutes(keras.callbacks.Callback):
    """Ends training when another epoch would overrun a wall-clock budget.

    After each epoch, the mean epoch time so far predicts the end of the
    next one; if that is past `minutes` from the start of `fit`, training
    stops (a checkpoint written by `BackupAndRestore` stays usable, so a
    resumed run continues from it). Epochs skipped by a resumed run do not
    count.

    Args:
        minutes: the budget, in minutes, from the start of `fit`.
        note: appended to the message printed when it stops (e.g. how to
            resume).

    Attributes:
        stopped: whether it ended the training.

    Example (a budget of 0 minutes stops after the first epoch):

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((8, 2)), np.ones((8, 1))
    >>> stop = StopAfterMinutes(0, note="; run it again to resume")
    >>> history = model.fit(x, y, epochs=100, verbose=0, callbacks=[stop])
    <BLANKLINE>
    stopping: the 0-minute budget is spent; run it again to resume
    >>> stop.stopped, len(history.history["loss"])
    (True, 1)
    """

    def __init__(self, minutes, note=""):
        super().__init__()
        self.seconds = float(minutes) * 60
        self.note = note
        self.start = None
        self.first_epoch = None
        self.stopped = False

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()
        self.first_epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        if self.first_epoch is None:  # later than 0 in a resumed run
            self.first_epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 >= (self.params or {}).get("epochs", float("inf")):
            return  # the last epoch: nothing left to stop
        elapsed = time.perf_counter() - self.start
        epochs_here = epoch + 1 - (self.first_epoch or 0)
        if elapsed * (epochs_here + 1) / max(epochs_here, 1) > self.seconds:
            print(
                f"\nstopping: the {self.seconds / 60:g}-minute budget is "
                f"spent{self.note}"
            )
            self.model.stop_training = True
            self.stopped = True


class Throughput(keras.callbacks.Callback):
    """Training speed of every epoch, and the accelerator's peak memory.

    An epoch is timed from its first training step to its last, validation
    left out; in the first epoch of `fit` the first `warmup_steps` steps
    (tracing and compiling) are left out too. At the end of the window the
    callback reads the optimizer's step counter, which the last step writes,
    so the time includes the device's work even where the backend
    dispatches asynchronously (JAX, PyTorch on CUDA); at the start of the
    first epoch's window the warm-up steps may still be running, which can
    only make the figure lower. It adds no hook per step after the window
    starts (Keras' asynchronous callback dispatch stays on).

    Args:
        items_per_step: what one training step processes, for the
            per-second figure, e.g. `batch_size * sequence_length` tokens
            or `batch_size` images (a nominal batch: a short last batch
            counts in full). `None`: steps per second only.
        unit: the name of those items ("tokens", "images", "examples").
        flops_per_item: optional training FLOPs per item (e.g.
            `GPTBackbone.flops_per_token()`): the summary then gives the
            model's TFLOP/s and its FLOPs utilisation (`mfu`), a fraction
            of the device's data-sheet peak for the model's compute dtype
            (`zoo.accelerator.peak_tflops`; None for a device it does not
            list, such as a CPU).
        warmup_steps: steps of the first epoch that are not timed.
        verbose: print one line per epoch.

    Attributes:
        epochs: one dict per timed epoch: `epoch`, `steps`, `seconds`,
            `steps_per_second` and `<unit>_per_second`.
        device, peak_memory_bytes: the accelerator and its allocator's
            peak at the end of training (`zoo.accelerator.accelerator`;
            `("cpu", None)` without one).

    Example (4 steps of 8 examples an epoch, the first 2 not timed; the
    speeds vary from run to run, so `describe()`'s line is not checked):

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((32, 2)), np.ones((32, 1))
    >>> speed = Throughput(8, unit="examples")
    >>> _ = model.fit(x, y, batch_size=8, epochs=2, verbose=0,
    ...               callbacks=[speed])
    >>> [entry["steps"] for entry in speed.epochs]
    [2, 4]
    >>> sorted(speed.summary())
    ['device', 'examples_per_second', 'peak_memory_gib',
     'steps_per_second', 'timed_epochs']
    >>> print(speed.describe())  # doctest: +SKIP
    training speed: 41,210 examples/s (median of 2 epochs)
    """

    def __init__(
        self,
        items_per_step=None,
        unit="examples",
        warmup_steps=2,
        verbose=False,
        flops_per_item=None,
    ):
        super().__init__()
        if items_per_step is not None and items_per_step <= 0:
            raise ValueError(
                f"items_per_step must be positive; got {items_per_step}."
            )
        if flops_per_item is not None and (
            flops_per_item <= 0 or items_per_step is None
        ):
            raise ValueError(
                "flops_per_item must be positive and needs items_per_step; "
                f"got {flops_per_item} and {items_per_step}."
            )
        self.flops_per_item = flops_per_item
        self.compute_dtype = None
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0; got {warmup_steps}.")
        self.items_per_step = items_per_step
        self.unit = str(unit)
        self.warmup_steps = int(warmup_steps)
        self.verbose = verbose
        self.epochs = []
        self.device, self.peak_memory_bytes = "cpu", None
        self._first_epoch = True
        self._epoch = None
        self._epoch_start_step = None
        self._skip = self.warmup_steps
        self._start = None

    def _step_counter(self):
        """The optimizer's step count; reading it waits for the last step."""
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def on_train_begin(self, logs=None):
        self._first_epoch = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._epoch_start_step = self._step_counter()
        self._start = None
        self._skip = self.warmup_steps if self._first_epoch else 0
        self._first_epoch = False

    def on_train_batch_begin(self, batch, logs=None):
        if self._start is None and batch >= self._skip:
            self._start = (time.perf_counter(), self._epoch_start_step + batch)

    def on_test_begin(self, logs=None):
        self._stop_clock()

    def on_epoch_end(self, epoch, logs=None):
        self._stop_clock()

    def on_train_end(self, logs=None):
        from zoo.accelerator import accelerator

        self.device, self.peak_memory_bytes = accelerator()
        self.compute_dtype = self.model.dtype_policy.compute_dtype

    def _stop_clock(self):
        if self._start is None:
            return
        start_time, start_step = self._start
        self._start = None
        steps = self._step_counter() - start_step
        seconds = time.perf_counter() - start_time
        if steps <= 0 or seconds <= 0:
            return
        entry = {
            "epoch": self._epoch + 1,
            "steps": steps,
            "seconds": round(seconds, 4),
            "steps_per_second": steps / seconds,
        }
        if self.items_per_step is not None:
            entry[f"{self.unit}_per_second"] = (
                steps * self.items_per_step / seconds
            )
        self.epochs.append(entry)
        if self.verbose:
            rate = entry.get(f"{self.unit}_per_second")
            print(
                f"epoch {entry['epoch']}: {entry['steps_per_second']:.2f} "
                f"steps/s"
                + (f", {rate:,.0f} {self.unit}/s" if rate is not None else "")
            )

    def summary(self):
        """The median epoch's speed, the device and its peak memory, for a
        metrics file: `{"device", "timed_epochs", "steps_per_second",
        "<unit>_per_second", "peak_memory_gib"}` (speeds None if no epoch
        had a timed step)."""
        result = {"device": self.device, "timed_epochs": len(self.epochs)}
        keys = ["steps_per_second"]
        if self.items_per_step is not None:
            keys.append(f"{self.unit}_per_second")
        for key in keys:
            values = [entry[key] for entry in self.epochs]
            result[key] = round(float(np.median(values)), 3) if values else None
        result["peak_memory_gib"] = (
            None
            if self.peak_memory_bytes is None
            else round(self.peak_memory_bytes / 2**30, 3)
        )
        if self.flops_per_item is not None:
            from zoo.accelerator import peak_tflops

            rate = result[f"{self.unit}_per_second"]
            tflops = None if rate is None else rate * self.flops_per_item / 1e12
            peak = peak_tflops(self.device, self.compute_dtype)
            result["model_tflops_per_second"] = (
                None if tflops is None else round(tflops, 4)
            )
            result["mfu"] = (
                None
                if tflops is None or peak is None
                else round(tflops / peak, 4)
            )
        return result

    def describe(self):
        """`summary()` as one line, e.g. "training speed: 812,000 tokens/s
        (median of 3 epochs), peak memory 1.91 GiB on NVIDIA H100"."""
        summary = self.summary()
        if summary["steps_per_second"] is None:
            return (
                "training speed: no timed step (epochs shorter than the "
                f"{self.warmup_steps} warm-up steps)"
            )
        rate = summary.get(f"{self.unit}_per_second")
        line = "training speed: " + (
            f"{rate:,.0f} {self.unit}/s"
            if rate is not None
            else f"{summary['steps_per_second']:.2f} steps/s"
        )
        line += f" (median of {summary['timed_epochs']} epochs)"
        if summary["peak_memory_gib"] is not None:
            line += (
                f", peak memory {summary['peak_memory_gib']:.2f} GiB"
                f" on {summary['device']}"
            )
        if summary.get("mfu") is not None:
            line += (
                f", model FLOPs utilisation {summary['mfu']:.1%} of its "
                f"{self.compute_dtype} peak"
            )
        return line


HISTORY_FILE = "history.csv"
BACKUP_FOLDER = "backup"


def _resuming(directory):
    """Whether a `fit` with `resume_callbacks(directory)` continues an
    interrupted run: its backup is there."""
    return os.path.isdir(os.path.join(directory, BACKUP_FOLDER))


class KeepBest(keras.callbacks.Callback):
    """Keeps the weights of the best epoch on disk and gives them back to
    the model when training ends, across interruptions.

    `keras.callbacks.EarlyStopping(restore_best_weights=True)` without the
    stopping, but the best weights and their figure live in `directory`
    (`best.weights.h5`, `best.json`, each written atomically), so a run
    resumed from `resume_callbacks(directory)`'s backup still ends with the
    best epoch of the whole run. Put it before those callbacks: an epoch's
    best is then on disk before its backup is.

    Args:
        directory: where the files go (a recipe's output folder).
        monitor: the logged figure to minimise, "val_loss" by default.
        resume: whether `fit` continues an interrupted run, reading the best
            so far from `best.json`; a fresh run removes an earlier run's
            files. None: resuming when `<directory>/backup` (the backup of
            `resume_callbacks`) exists as training starts.

    After training, `best_epoch` (counted from 1) and `best` hold the kept
    epoch and its figure, None if the figure was never logged (the model
    then keeps its last weights).

    Example (a model whose validation loss falls every epoch):

    >>> model = keras.Sequential(
    ...     [keras.Input((2,)), keras.layers.Dense(1, kernel_initializer="zeros")]
    ... )
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((8, 2)), np.ones((8, 1))
    >>> os.makedirs("runs/demo")
    >>> keep = KeepBest("runs/demo")
    >>> _ = model.fit(x, y, validation_data=(x, y), epochs=3, verbose=0,
    ...               callbacks=[keep, *resume_callbacks("runs/demo")])
    >>> keep.best_epoch, round(keep.best, 4)
    (3, 0.6899)
    >>> sorted(os.listdir("runs/demo"))  # the backup stays until finish_run
    ['backup', 'best.json', 'best.weights.h5', 'history.csv']
    """

    WEIGHTS, RECORD = "best.weights.h5", "best.json"

    def __init__(self, directory, monitor="val_loss", resume=None):
        super().__init__()
        self.directory, self.monitor, self.resume = directory, monitor, resume
        self.best = self.best_epoch = None

    def _path(self, name):
        return os.path.join(self.directory, name)

    def on_train_begin(self, logs=None):
        self.best = self.best_epoch = None
        resume = self.resume
        if resume is None:
            resume = _resuming(self.directory)
        record, weights = self._path(self.RECORD), self._path(self.WEIGHTS)
        if resume and os.path.exists(record) and os.path.exists(weights):
            with open(record) as f:
                saved = json.load(f)
            self.best, self.best_epoch = saved["best"], saved["epoch"]
        elif not resume:
            for path in (record, weights):
                if os.path.exists(path):
                    os.remove(path)

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None or not np.isfinite(value):
            return
        if self.best is None or value < self.best:
            save_weights_atomic(self.model, self._path(self.WEIGHTS))
            self.best, self.best_epoch = float(value), epoch + 1
            write_json_atomic(
                {
                    "monitor": self.monitor,
                    "best": self.best,
                    "epoch": self.best_epoch,
                },
                self._path(self.RECORD),
            )

    def on_train_end(self, logs=None):
        if self.best_epoch is not None:
            self.model.load_weights(self._path(self.WEIGHTS))


class AverageLastEpochs(keras.callbacks.Callback):
    """Ends training with the average of the weights of its last epochs
    (checkpoint averaging: Vaswani et al. 2017 averaged the last 5 or 20
    checkpoints of their translation models).

    The weights at the end of each of the last `epochs` epochs of `fit` are
    written to `<directory>/average/epoch_<n>.weights.h5` (atomically);
    when training ends, every floating-point variable of the model is set
    to its mean over those files (integer variables, such as random seeds,
    keep their last values). The files stay on disk until
    `finish_run(directory)`, so a run resumed from
    `resume_callbacks(directory)`'s backup still averages every epoch of
    the window; a fresh run removes an earlier run's.

    Args:
        directory: where the files go (a recipe's output folder).
        epochs: how many of the last epochs to average (1: the last
            epoch's weights, unchanged).
        resume: whether `fit` continues an interrupted run; None: resuming
            when `<directory>/backup` exists as training starts.

    After training, `averaged` lists the epochs (counted from 1) whose
    weights were averaged.

    Example (plain SGD from zero: the mean of the weights after epochs 2
    and 3):

    >>> model = keras.Sequential(
    ...     [keras.Input((1,)), keras.layers.Dense(1, use_bias=False,
    ...                                            kernel_initializer="zeros")]
    ... )
    >>> model.compile(optimizer=keras.optimizers.SGD(0.25), loss="mse")
    >>> x, y = np.ones((1, 1)), np.ones((1, 1))
    >>> os.makedirs("runs/average")
    >>> average = AverageLastEpochs("runs/average", epochs=2)
    >>> _ = model.fit(x, y, epochs=3, verbose=0, callbacks=[average])
    >>> average.averaged, float(model.get_weights()[0][0, 0])  # (0.75+0.875)/2
    ([2, 3], 0.8125)
    """

    FOLDER = "average"

    def __init__(self, directory, epochs, resume=None):
        super().__init__()
        if int(epochs) < 1:
            raise ValueError(f"epochs must be >= 1; got {epochs}.")
        self.directory, self.epochs, self.resume = (
            directory,
            int(epochs),
            resume,
        )
        self.averaged = []

    def _path(self, epoch):
        return os.path.join(
            self.directory, self.FOLDER, f"epoch_{epoch}.weights.h5"
        )

    def on_train_begin(self, logs=None):
        self.averaged = []
        resume = self.resume
        if resume is None:
            resume = _resuming(self.directory)
        folder = os.path.join(self.directory, self.FOLDER)
        if not resume and os.path.isdir(folder):
            shutil.rmtree(folder)

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 > self.params["epochs"] - self.epochs:
            save_weights_atomic(self.model, self._path(epoch + 1))

    def on_train_end(self, logs=None):
        last = self.params["epochs"]
        epochs = [
            n
            for n in range(max(last - self.epochs, 0) + 1, last + 1)
            if os.path.exists(self._path(n))
        ]
        if not epochs:
            return
        variables = [
            v
            for v in self.model.weights
            if "float" in keras.backend.standardize_dtype(v.dtype)
        ]
        total = [np.zeros(v.shape, "float64") for v in variables]
        for n in epochs:
            self.model.load_weights(self._path(n))
            for sum_, v in zip(total, variables):
                sum_ += keras.ops.convert_to_numpy(v)
        for v, sum_ in zip(variables, total):
            v.assign(sum_ / len(epochs))
        self.averaged = epochs


class BackupUntilDone(keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` that survives being killed at any
    point, and keeps its backup until the run's result is saved.

    - Each backup is written whole or not at all: the weights go to a
      temporary file in `backup_dir` that is renamed over
      `latest.weights.h5`, then `training_metadata.json` (the epoch, and
      the weights file's SHA-256) is written the same way. A kill mid-write
      (SIGKILL, SIGTERM) leaves the last backup as it was, and a temporary
      file that the next `fit` removes.
    - With `double_checkpoint` (on by default here) the backup before the
      latest is kept beside it (`*.bkp`, a hard link where the file
      system has them, else a copy). When `fit` starts and the latest
      backup is damaged (an empty or truncated file, as Keras' own
      callback leaves when killed mid-write; metadata that is not whole;
      weights that fail the checksum, as after a kill between the two
      files), it warns in one line naming the file and resumes from the
      previous one; with no whole backup left, it warns and training
      starts from the first epoch. A damaged backup never stops a run.
    - The backup stays when `fit` ends: a run killed after training, before
      its model file is written, resumes with no epoch left to train and
      writes it then. Call `finish()` (or `finish_run` for
      `resume_callbacks`' folder) once the result is safely on disk. With
      `delete_checkpoint=True`, `fit` removes it as Keras' callback does,
      but only once it has run all its epochs: never when it stopped early
      (`StopAfterMinutes`, anything that sets `model.stop_training`).

    Args:
        backup_dir: a local folder for this run's backup only.
        save_freq: "epoch" or a number of batches, as Keras'.
        double_checkpoint: keep the previous backup to fall back on.
        delete_checkpoint: remove the backup when `fit` has run all its
            epochs (default False: `finish()` does).

    Example (stopped after one epoch, then resumed):

    >>> import os, tempfile
    >>> run = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> backup = BackupUntilDone(os.path.join(run, "backup"))
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=[backup])
    >>> sorted(os.listdir(backup.backup_dir))  # kept after fit
    ['latest.weights.h5', 'latest.weights.h5.bkp',
     'training_metadata.json', 'training_metadata.json.bkp']
    >>> path = os.path.join(run, "model.keras")
    >>> _ = zoo.saving.save_model_atomic(model, path)
    >>> backup.finish()  # only now: the run's result is on disk
    >>> os.listdir(run)
    ['model.keras']
    """

    def __init__(
        self,
        backup_dir,
        save_freq="epoch",
        double_checkpoint=True,
        delete_checkpoint=False,
    ):
        super().__init__(
            backup_dir,
            save_freq=save_freq,
            double_checkpoint=double_checkpoint,
            delete_checkpoint=delete_checkpoint,
        )

    def _pairs(self):
        """The latest backup and the one before, each `(weights, metadata)`."""
        return [
            (self._weights_path, self._training_metadata_path),
            (self._prev_weights_path, self._prev_training_metadata_path),
        ]

    def on_train_begin(self, logs=None):
        if not self.model.built:
            raise ValueError(
                f"BackupUntilDone needs a built model before fit(); "
                f"{self.model.name} is not built (call it on a batch first)."
            )
        self._current_epoch = 0
        if not os.path.isdir(self.backup_dir):
            return
        remove_temporaries(self.backup_dir)
        latest, previous = self._pairs()
        damaged = None
        for pair in (latest, previous):
            if not any(map(os.path.exists, pair)):
                continue
            problem = self._check(*pair)
            if problem is None:
                if pair is previous:  # made the latest again, then loaded
                    for path, target in zip(previous, latest):
                        _link_atomic(path, target)
                problem = self._restore()
            if problem is None:
                if damaged is not None:
                    warnings.warn(
                        f"{damaged[0]}: damaged backup ({damaged[1]}); "
                        f"resuming from the previous one, {pair[0]} "
                        f"(epoch {self._current_epoch}).",
                        stacklevel=2,
                    )
                return
            damaged = damaged or (pair[0], problem)
            for path in {*pair, *latest}:  # never kept as the previous one
                if os.path.exists(path):
                    os.remove(path)
        if damaged is not None:
            warnings.warn(
                f"{damaged[0]}: damaged backup ({damaged[1]}) and no whole "
                "earlier one; training starts from the first epoch.",
                stacklevel=2,
            )

    @staticmethod
    def _check(weights, metadata):
        """What is wrong with one backup's files, or None."""
        try:
            with open(metadata) as f:
                record = json.load(f)
            int(record["epoch"])
        except FileNotFoundError:
            return f"{os.path.basename(metadata)} is missing"
        except (ValueError, KeyError, TypeError):
            return f"{os.path.basename(metadata)} is not whole"
        if not os.path.exists(weights):
            return "missing"
        import h5py

        if not h5py.is_hdf5(weights):
            return (
                f"{os.path.getsize(weights)} bytes, not an HDF5 file: "
                "truncated or empty"
            )
        digest = record.get("weights_sha256")
        if digest is not None and digest != _sha256(weights):
            return (
                f"not the checksum in {os.path.basename(metadata)}: "
                "truncated, or written by a save that was interrupted"
            )
        return None

    def _restore(self):
        """Loads the latest backup into the model: None, or what is wrong
        with it (the model's weights may then be partly overwritten)."""
        with open(self._training_metadata_path) as f:
            epoch = int(json.load(f)["epoch"])
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        try:
            self.model.load_weights(self._weights_path)
        except OSError as error:  # h5py: a damaged file
            return str(error).splitlines()[0] if str(error) else "unreadable"
        self.model._initial_epoch = epoch
        self._current_epoch = epoch
        return None

    def _save_model(self):
        """Writes the backup: weights, then metadata, each through a
        temporary file renamed into place; the latest pair becomes the
        previous one (`double_checkpoint`) just before the new weights are
        renamed over it."""
        os.makedirs(self.backup_dir, exist_ok=True)
        with atomic_path(self._weights_path, suffix=".weights.h5") as tmp:
            self.model.save_weights(tmp, overwrite=True)
            digest = _sha256(tmp)
            latest = self._pairs()[0]
            if self.double_checkpoint and all(map(os.path.exists, latest)):
                for path, previous in zip(latest, self._pairs()[1]):
                    _link_atomic(path, previous)
        write_json_atomic(
            {
                "epoch": self._current_epoch,
                "batch": self._last_batch_seen,
                "weights_sha256": digest,
            },
            self._training_metadata_path,
        )

    def on_train_end(self, logs=None):
        epochs = (self.params or {}).get("epochs")
        if epochs is not None and self._current_epoch < epochs:
            return  # stopped early: the next fit continues from here
        super().on_train_end(logs)

    def finish(self):
        """Removes the backup: call it once the run's result (its `.keras`
        file, its metrics) is safely written; until then a rerun resumes."""
        shutil.rmtree(self.backup_dir, ignore_errors=True)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _link_atomic(source, target):
    """Makes `target` the file `source` is, atomically: a hard link renamed
    into place (a copy where the file system has no hard links)."""
    with atomic_path(target) as tmp:
        os.remove(tmp)
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)


def finish_run(directory):
    """Removes the backup that `resume_callbacks(directory)` keeps
    (`<directory>/backup`), and the epochs' weights `AverageLastEpochs`
    keeps (`<directory>/average`): call it last, once the run's model file
    and metrics are written. Until then, running the same command again
    resumes (after training has ended: with no epoch left to train, it
    only writes the files again).

    Example:

    >>> import os, tempfile
    >>> run = tempfile.mkdtemp()
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0,
    ...               callbacks=resume_callbacks(run))
    >>> sorted(os.listdir(run))
    ['backup', 'history.csv']
    >>> finish_run(run)  # after writing the model file and metrics
    >>> os.listdir(run)
    ['history.csv']
    """
    for folder in (BACKUP_FOLDER, AverageLastEpochs.FOLDER):
        shutil.rmtree(os.path.join(directory, folder), ignore_errors=True)


def resume_callbacks(directory):
    """Callbacks that let a recipe's `fit` resume where it was interrupted:
    `BackupUntilDone` in `<directory>/backup` (weights, optimizer,
    schedule step and epoch after every epoch, written atomically, with
    the previous epoch's to fall back on; kept when `fit` ends, until
    `finish_run(directory)`) and a `keras.callbacks.CSVLogger` of every
    epoch's figures in `<directory>/history.csv`, appended to when a backup
    is there, so `read_history` gives the whole run's curves.

    Run the same `fit` again after an interruption, even a kill, and it
    continues from the last finished epoch. For the same batches and
    dropout as the uninterrupted run, make them a function of the epoch
    (`ReproducibleEpochs`).

    Example:

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((8, 2)), np.ones((8, 1))
    >>> os.makedirs("runs/fresh")  # the folder is the caller's to make
    >>> _ = model.fit(x, y, epochs=2, verbose=0,
    ...               callbacks=resume_callbacks("runs/fresh"))
    >>> curves = read_history(os.path.join("runs/fresh", HISTORY_FILE))
    >>> len(curves["loss"]), sorted(os.listdir("runs/fresh"))
    (2, ['backup', 'history.csv'])
    >>> _ = zoo.saving.save_model_atomic(model, "runs/fresh/model.keras")
    >>> finish_run("runs/fresh")  # the backup goes once the model is written
    >>> sorted(os.listdir("runs/fresh"))
    ['history.csv', 'model.keras']
    """
    return [
        keras.callbacks.CSVLogger(
            os.path.join(directory, HISTORY_FILE), append=_resuming(directory)
        ),
        BackupUntilDone(os.path.join(directory, BACKUP_FOLDER)),
    ]


def resumed_history(directory, this_run):
    """`(curves, resumed_at_epoch)` after a `fit` with `resume_callbacks(
    directory)`: the whole run's curves (`read_history` of its log) and
    the epoch this `fit` started at (0 for a run never interrupted), from
    the `keras.callbacks.History` that `fit` returned (`this_run`).

    Example (interrupted after one epoch, then resumed):

    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> x, y = np.ones((8, 2)), np.ones((8, 1))
    >>> os.makedirs("runs/resumed")
    >>> _ = model.fit(x, y, epochs=3, verbose=0, callbacks=[
    ...     *resume_callbacks("runs/resumed"), StopAfterMinutes(0)])
    <BLANKLINE>
    stopping: the 0-minute budget is spent
    >>> this_run = model.fit(x, y, epochs=3, verbose=0,
    ...                      callbacks=resume_callbacks("runs/resumed"))
    >>> curves, resumed_at = resumed_history("runs/resumed", this_run)
    >>> len(curves["loss"]), resumed_at
    (3, 1)
    """
    curves = read_history(os.path.join(directory, HISTORY_FILE))
    return curves, len(curves["loss"]) - len(this_run.history.get("loss", []))


def read_history(path):
    """The whole run's curves from a `keras.callbacks.CSVLogger` file
    (`append=True` across interruptions), one value per epoch: an epoch
    logged twice, redone after an interruption, counts once. CSVLogger
    writes "NA" for a figure an epoch did not log (its `val_` columns when
    `fit` has no validation data): such a value reads as NaN, and a column
    that is "NA" in every epoch is left out.

    Returns:
        `{metric: [value per epoch]}`, epochs in order.

    Example (epoch 1 logged twice, redone after an interruption):

    >>> with open("history.csv", "w") as f:
    ...     _ = f.write("epoch,loss\\n0,0.9\\n1,0.7\\n1,0.6\\n2,0.5\\n")
    >>> read_history("history.csv")
    {'loss': [0.9, 0.6, 0.5]}
    """
    with open(path, newline="") as f:
        rows = {int(row["epoch"]): row for row in csv.DictReader(f)}
    if not rows:
        raise ValueError(f"{path} holds no epoch.")
    epochs = sorted(rows)
    keys = [
        k
        for k in rows[epochs[0]]
        if k != "epoch" and any(rows[e][k] != "NA" for e in epochs)
    ]
    return {
        k: [float("nan" if rows[e][k] == "NA" else rows[e][k]) for e in epochs]
        for k in keys
    }

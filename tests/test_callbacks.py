"""zoo.callbacks under the current backend, on a fake clock:
StopAfterMinutes stops when the next epoch would overrun the budget,
counting only the epochs a resumed run trains; Throughput times the
training steps of each epoch, not the warm-up steps or validation."""

import functools
import hashlib
import json
import os
import shutil
import tempfile

import keras
import numpy as np
import pytest

from zoo import callbacks
from zoo.callbacks import StopAfterMinutes, Throughput


class FakeClock:
    """Each epoch takes `epoch_seconds`: the clock advances as epochs end."""

    def __init__(self, epoch_seconds):
        self.now = 0.0
        self.epoch_seconds = epoch_seconds

    def __call__(self):
        return self.now


class Tick(keras.callbacks.Callback):
    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def on_epoch_end(self, epoch, logs=None):
        self.clock.now += self.clock.epoch_seconds


def _fit(stopper, clock, initial_epoch=0, epochs=50):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        epochs=epochs,
        initial_epoch=initial_epoch,
        verbose=0,
        callbacks=[Tick(clock), stopper],
    )
    return len(history.history["loss"])


@pytest.mark.parametrize("initial_epoch", [0, 20])
def test_stops_before_the_epoch_that_would_overrun(
    monkeypatch, capsys, initial_epoch
):
    clock = FakeClock(epoch_seconds=60)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    stopper = StopAfterMinutes(3.5, note="; --resume continues")
    # Epochs end at 1, 2, 3 minutes; a 4th would end at 4 > 3.5.
    assert _fit(stopper, clock, initial_epoch) == 3
    assert stopper.stopped
    assert "3.5-minute budget is spent; --resume continues" in (
        capsys.readouterr().out
    )


def test_the_last_epoch_is_not_a_stop(monkeypatch, capsys):
    """A budget spent by the last epoch stops nothing: the run is whole
    (a recipe that read it as stopped would not save its model)."""
    clock = FakeClock(epoch_seconds=60)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    stopper = StopAfterMinutes(3.5)
    assert _fit(stopper, clock, epochs=3) == 3  # 3 minutes, a 4th: none
    assert not stopper.stopped
    assert "budget is spent" not in capsys.readouterr().out


def test_an_ample_budget_never_stops(monkeypatch):
    clock = FakeClock(epoch_seconds=1)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    stopper = StopAfterMinutes(float("inf"))
    assert _fit(stopper, clock) == 50
    assert not stopper.stopped


class StepClock(keras.callbacks.Callback):
    """A training step takes 1 second, a validation batch 100."""

    def __init__(self, clock):
        super().__init__()
        self.clock = clock

    def on_train_batch_end(self, batch, logs=None):
        self.clock.now += 1.0

    def on_test_batch_end(self, batch, logs=None):
        self.clock.now += 100.0


@pytest.mark.parametrize("validation", [True, False], ids=["val", "no-val"])
@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_throughput_times_training_steps_after_the_warm_up(
    monkeypatch, validation, steps_per_execution
):
    if steps_per_execution > 1 and keras.backend.backend() == "torch":
        pytest.skip("Keras under PyTorch runs one step per execution")
    clock = FakeClock(epoch_seconds=0)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(
        optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution
    )
    speed = Throughput(items_per_step=8 * 16, unit="tokens", warmup_steps=2)
    x, y = np.ones((80, 2)), np.ones((80, 1))  # 10 steps of 8
    model.fit(
        x,
        y,
        batch_size=8,
        epochs=3,
        verbose=0,
        validation_data=(x[:16], y[:16]) if validation else None,
        callbacks=[StepClock(clock), speed],
    )
    # The first epoch leaves out 2 warm-up steps; none is left out later.
    assert [e["steps"] for e in speed.epochs] == [8, 10, 10]
    for entry in speed.epochs:
        # Each execution took 1 s of the fake clock (the batch hooks run
        # once per execution), validation (100 s a batch) is outside.
        assert entry["steps_per_second"] == pytest.approx(steps_per_execution)
        assert entry["tokens_per_second"] == pytest.approx(
            entry["steps_per_second"] * 128
        )
    summary = speed.summary()
    assert summary["timed_epochs"] == 3
    assert summary["tokens_per_second"] == pytest.approx(
        128 * summary["steps_per_second"]
    )
    assert summary["device"] in ("cpu", "unknown")
    assert summary["peak_memory_gib"] is None


def test_throughput_without_items_and_an_epoch_shorter_than_the_warm_up(
    monkeypatch, capsys
):
    clock = FakeClock(epoch_seconds=0)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    speed = Throughput(warmup_steps=5, verbose=True)
    model.fit(
        np.ones((12, 2)),
        np.ones((12, 1)),
        batch_size=4,
        epochs=2,
        verbose=0,
        callbacks=[StepClock(clock), speed],
    )
    # Epoch 1 has 3 steps, all warm-up: only epoch 2 is timed.
    assert [(e["epoch"], e["steps"]) for e in speed.epochs] == [(2, 3)]
    assert "examples_per_second" not in speed.epochs[0]
    assert set(speed.summary()) == {
        "device",
        "timed_epochs",
        "steps_per_second",
        "peak_memory_gib",
    }
    assert "epoch 2: 1.00 steps/s" in capsys.readouterr().out


def test_throughput_gives_model_flops_utilisation_against_the_peak(
    monkeypatch, capsys
):
    clock = FakeClock(epoch_seconds=0)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    import zoo.accelerator

    # 1 step/s of 128 tokens at 2e12 FLOPs each: 256 TFLOP/s.
    monkeypatch.setattr(
        zoo.accelerator, "accelerator", lambda: ("NVIDIA H100 80GB HBM3", 2**30)
    )
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    speed = Throughput(
        items_per_step=128, unit="tokens", warmup_steps=0, flops_per_item=2e12
    )
    model.fit(
        np.ones((16, 2)),
        np.ones((16, 1)),
        batch_size=8,
        epochs=1,
        verbose=0,
        callbacks=[StepClock(clock), speed],
    )
    summary = speed.summary()
    assert summary["model_tflops_per_second"] == pytest.approx(256)
    assert summary["mfu"] == pytest.approx(256 / 494.7, abs=1e-4)  # float32
    assert "model FLOPs utilisation 51.7% of its float32 peak" in (
        speed.describe()
    )
    # A device without a known peak (a CPU): the TFLOP/s, no utilisation.
    monkeypatch.setattr(zoo.accelerator, "accelerator", lambda: ("cpu", None))
    speed.on_train_end()
    assert speed.summary()["mfu"] is None
    assert "utilisation" not in speed.describe()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"items_per_step": 0},
        {"warmup_steps": -1},
        {"flops_per_item": 1e9},
        {"items_per_step": 8, "flops_per_item": 0},
    ],
)
def test_throughput_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match=list(kwargs)[-1]):
        Throughput(**kwargs)


def test_read_history_counts_an_epoch_redone_after_an_interruption_once(
    tmp_path,
):
    from zoo.callbacks import read_history

    path = tmp_path / "history.csv"
    path.write_text(
        "epoch,loss,val_loss\n0,2.0,2.5\n1,1.5,2.1\n1,1.4,2.0\n2,1.2,1.9\n"
    )  # epoch 1 redone
    assert read_history(path) == {
        "loss": [2.0, 1.4, 1.2],
        "val_loss": [2.5, 2.0, 1.9],
    }
    (tmp_path / "empty.csv").write_text("epoch,loss\n")
    with pytest.raises(ValueError, match="no epoch"):
        read_history(tmp_path / "empty.csv")


def test_read_history_leaves_out_what_no_epoch_logged(tmp_path):
    """CSVLogger writes NA for the val_ figures of a fit without validation
    data; an epoch that misses a figure others have reads as NaN."""
    from zoo.callbacks import read_history

    path = tmp_path / "history.csv"
    path.write_text("epoch,loss,val_loss,acc\n0,2.0,NA,NA\n1,1.5,NA,0.5\n")
    curves = read_history(path)
    assert sorted(curves) == ["acc", "loss"]
    assert curves["loss"] == [2.0, 1.5]
    assert np.isnan(curves["acc"][0]) and curves["acc"][1] == 0.5

    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        epochs=2,
        verbose=0,
        callbacks=[keras.callbacks.CSVLogger(str(path))],
    )
    assert list(read_history(path)) == ["loss"]


def test_resume_callbacks_append_to_the_log_only_when_resuming(tmp_path):
    from zoo.callbacks import resume_callbacks

    logger, backup = resume_callbacks(str(tmp_path))
    assert isinstance(backup, callbacks.BackupUntilDone)
    assert isinstance(logger, keras.callbacks.CSVLogger)
    assert not logger.append  # a fresh run starts a fresh log
    (tmp_path / "backup").mkdir()
    assert resume_callbacks(str(tmp_path))[0].append


@pytest.mark.parametrize(
    "budget_minutes, kept", [(2.5, True), (float("inf"), False)]
)
def test_a_run_stopped_early_keeps_its_backup_and_continues(
    monkeypatch, tmp_path, budget_minutes, kept
):
    from zoo.callbacks import BackupUntilDone

    clock = FakeClock(epoch_seconds=60)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    backup = str(tmp_path / "backup")

    def fit(budget):
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        return len(
            model.fit(
                np.ones((4, 2)),
                np.ones((4, 1)),
                epochs=5,
                verbose=0,
                callbacks=[
                    Tick(clock),
                    BackupUntilDone(backup, delete_checkpoint=True),
                    StopAfterMinutes(budget),
                ],
            ).history["loss"]
        )

    trained = fit(budget_minutes)
    assert os.path.isdir(backup) == kept
    if kept:  # 2 epochs in the budget; the same fit again does the rest
        assert trained == 2
        assert fit(float("inf")) == 3
        assert not os.path.isdir(backup)  # all 5 epochs done: removed


# ---- BackupUntilDone: atomic backups, damaged ones, kept until finished ----

X = np.linspace(-1, 1, 16, dtype="float32").reshape(8, 2)
Y = (X @ np.array([[1.5], [-2.0]], "float32")) + 0.5


def _fit_backed_up(backup, epochs, **options):
    """A fixed start (weights, Adam) and fixed batches: fits that resume
    from a backup end as the uninterrupted one does. Returns `(final
    weights, epochs this fit trained)`."""
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.set_weights([np.full((2, 1), 0.5, "float32"), np.zeros(1, "float32")])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    history = model.fit(
        X,
        Y,
        epochs=epochs,
        batch_size=4,
        shuffle=False,
        verbose=0,
        callbacks=[callbacks.BackupUntilDone(str(backup), **options)],
    )
    weights = [keras.ops.convert_to_numpy(w) for w in model.weights]
    return weights, len(history.history.get("loss", []))


@functools.cache
def _uninterrupted(epochs):
    """The weights of `_fit_backed_up` run through `epochs` in one go."""
    folder = tempfile.mkdtemp()
    try:
        return _fit_backed_up(os.path.join(folder, "backup"), epochs)[0]
    finally:
        shutil.rmtree(folder)


def _assert_same(weights, expected):
    for mine, theirs in zip(weights, expected, strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-6, atol=1e-7)


def _one_line_warning(record, *names):
    messages = [str(w.message) for w in record if w.category is UserWarning]
    assert len(messages) == 1, messages
    assert "\n" not in messages[0]
    for name in names:
        assert name in messages[0], messages[0]
    return messages[0]


def test_a_backup_is_written_aside_and_renamed_into_place(
    tmp_path, monkeypatch
):
    backup = tmp_path / "backup"
    latest = backup / "latest.weights.h5"
    written = []
    save_weights = keras.Model.save_weights

    def watched(model, path, *args, **kwargs):
        # While the new weights are written, the last backup is untouched.
        written.append(
            (os.path.basename(path), latest.read_bytes() if written else None)
        )
        save_weights(model, path, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "save_weights", watched)
    _fit_backed_up(backup, 2)
    assert [name.startswith(".tmp-") for name, _ in written] == [True, True]
    # The second write did not touch the first epoch's file, which is now
    # the previous backup; the metadata names each file's checksum.
    assert (backup / "latest.weights.h5.bkp").read_bytes() == written[1][1]
    latest_record = json.loads((backup / "training_metadata.json").read_text())
    previous = json.loads((backup / "training_metadata.json.bkp").read_text())
    assert (latest_record["epoch"], previous["epoch"]) == (2, 1)
    assert (
        latest_record["weights_sha256"]
        == hashlib.sha256(latest.read_bytes()).hexdigest()
    )
    assert sorted(os.listdir(backup)) == [
        "latest.weights.h5",
        "latest.weights.h5.bkp",
        "training_metadata.json",
        "training_metadata.json.bkp",
    ]


def test_a_temporary_file_left_by_a_killed_backup_is_removed(tmp_path):
    backup = tmp_path / "backup"
    _fit_backed_up(backup, 1)
    (backup / ".tmp-k1ll3d.weights.h5").write_bytes(b"\x89HDF")
    _, trained = _fit_backed_up(backup, 2)
    assert trained == 1
    assert not any(name.startswith(".tmp-") for name in os.listdir(backup))


def _zero_bytes(backup):
    (backup / "latest.weights.h5").write_bytes(b"")


def _truncated(backup):
    path = backup / "latest.weights.h5"
    path.write_bytes(path.read_bytes()[:1000])


def _weights_of_another_save(backup):
    # Killed between the two renames: new weights, the old metadata.
    path = backup / "latest.weights.h5"
    path.write_bytes((backup / "latest.weights.h5.bkp").read_bytes())


def _metadata_cut(backup):
    (backup / "training_metadata.json").write_text('{"epo')


@pytest.mark.parametrize(
    "damage", [_zero_bytes, _truncated, _weights_of_another_save, _metadata_cut]
)
def test_a_damaged_backup_falls_back_to_the_previous_one(tmp_path, damage):
    backup = tmp_path / "backup"
    expected = _uninterrupted(4)
    _fit_backed_up(backup, 2)  # backups of epochs 2 (latest) and 1 (previous)
    damage(backup)
    with pytest.warns(UserWarning) as record:
        weights, trained = _fit_backed_up(backup, 4)
    message = _one_line_warning(
        record, str(backup / "latest.weights.h5"), "previous", "epoch 1"
    )
    assert "damaged" in message
    assert trained == 3  # epochs 2 to 4, from the first epoch's backup
    _assert_same(weights, expected)


def test_with_no_whole_backup_training_starts_over(tmp_path):
    backup = tmp_path / "backup"
    expected = _uninterrupted(2)
    _fit_backed_up(backup, 2)
    for name in ("latest.weights.h5", "latest.weights.h5.bkp"):
        (backup / name).write_bytes(b"")
    with pytest.warns(UserWarning) as record:
        weights, trained = _fit_backed_up(backup, 2)
    _one_line_warning(
        record, str(backup / "latest.weights.h5"), "starts from the first"
    )
    assert trained == 2
    _assert_same(weights, expected)


def test_a_backup_written_by_keras_callback_resumes(tmp_path):
    backup = tmp_path / "backup"
    expected = _uninterrupted(3)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.set_weights([np.full((2, 1), 0.5, "float32"), np.zeros(1, "float32")])
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
    model.fit(
        X,
        Y,
        epochs=1,
        batch_size=4,
        shuffle=False,
        verbose=0,
        callbacks=[
            keras.callbacks.BackupAndRestore(
                str(backup), delete_checkpoint=False
            )
        ],
    )
    weights, trained = _fit_backed_up(backup, 3)
    assert trained == 2
    _assert_same(weights, expected)


def test_the_backup_stays_after_fit_until_the_run_is_finished(tmp_path):
    from zoo.callbacks import finish_run

    backup = tmp_path / "backup"
    expected, _ = _fit_backed_up(backup, 2)
    assert (backup / "latest.weights.h5").exists()
    # Killed before the model file was written: the same fit again has no
    # epoch left to train and ends with the trained weights.
    weights, trained = _fit_backed_up(backup, 2)
    assert trained == 0
    _assert_same(weights, expected)
    finish_run(str(tmp_path))
    assert not backup.exists()
    done = callbacks.BackupUntilDone(str(backup))
    backup.mkdir()
    done.finish()
    assert not backup.exists()


def test_resumed_history_gives_the_whole_curves_and_where_this_fit_began(
    tmp_path,
):
    from zoo.callbacks import resumed_history

    (tmp_path / "history.csv").write_text(
        "epoch,loss\n0,2.0\n1,1.5\n1,1.4\n2,1.2\n"
    )
    this_run = keras.callbacks.History()
    this_run.history = {"loss": [1.4, 1.2]}  # epochs 1 and 2, after a stop
    assert resumed_history(tmp_path, this_run) == ({"loss": [2.0, 1.4, 1.2]}, 1)
    this_run.history = {}  # a fit with nothing left to do
    assert resumed_history(tmp_path, this_run)[1] == 3


def _model_with_weight(value):
    model = keras.Sequential(
        [keras.Input((1,)), keras.layers.Dense(1, use_bias=False)]
    )
    model.set_weights([np.full((1, 1), value, "float32")])
    return model


def _epochs(keep, model, losses):
    """Runs `keep` through epochs whose weight is the epoch number and whose
    val_loss is `losses[epoch]`, as `fit` would call it."""
    keep.set_model(model)
    keep.on_train_begin()
    for epoch, loss in losses.items():
        model.set_weights([np.full((1, 1), epoch, "float32")])
        keep.on_epoch_end(epoch, {"val_loss": loss})
    keep.on_train_end()
    return float(model.get_weights()[0][0, 0])


def test_keep_best_gives_back_the_best_epochs_weights(tmp_path):
    keep = callbacks.KeepBest(str(tmp_path))
    weight = _epochs(
        keep,
        _model_with_weight(-1.0),
        {0: 3.0, 1: 2.0, 2: float("nan"), 3: 2.5},
    )
    assert weight == 1.0  # the weights of epoch index 1
    assert keep.best_epoch == 2 and keep.best == 2.0
    assert (tmp_path / "best.weights.h5").exists()
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]


def test_keep_best_resumes_with_the_best_of_the_interrupted_part(tmp_path):
    keep = callbacks.KeepBest(str(tmp_path))
    _epochs(keep, _model_with_weight(-1.0), {0: 3.0, 1: 1.0})
    (tmp_path / "backup").mkdir()  # resume_callbacks' backup: resuming
    resumed = callbacks.KeepBest(str(tmp_path))
    weight = _epochs(resumed, _model_with_weight(-1.0), {2: 1.5, 3: 2.0})
    assert weight == 1.0 and resumed.best_epoch == 2 and resumed.best == 1.0
    # Without a backup the run is a fresh one: the old best is dropped.
    (tmp_path / "backup").rmdir()
    fresh = callbacks.KeepBest(str(tmp_path))
    weight = _epochs(fresh, _model_with_weight(-1.0), {0: 5.0, 1: 6.0})
    assert weight == 0.0 and fresh.best_epoch == 1 and fresh.best == 5.0


def test_keep_best_without_the_figure_keeps_the_last_weights(tmp_path):
    keep = callbacks.KeepBest(str(tmp_path), monitor="val_accuracy")
    weight = _epochs(keep, _model_with_weight(-1.0), {0: 3.0, 1: 2.0})
    assert weight == 1.0 and keep.best_epoch is None and keep.best is None


def _average(average, model, epochs, total):
    """Runs `average` through epochs `epochs` (indices) of a `fit` of
    `total` epochs, the weight being the epoch number."""
    average.set_model(model)
    average.set_params({"epochs": total})
    average.on_train_begin()
    for epoch in epochs:
        model.set_weights([np.full((1, 1), epoch, "float32")])
        average.on_epoch_end(epoch)
    average.on_train_end()
    return float(model.get_weights()[0][0, 0])


def test_average_last_epochs_is_the_mean_of_their_weights(tmp_path):
    average = callbacks.AverageLastEpochs(str(tmp_path), epochs=3)
    weight = _average(average, _model_with_weight(-1.0), range(6), 6)
    assert weight == np.mean([3, 4, 5]) and average.averaged == [4, 5, 6]
    assert sorted(os.listdir(tmp_path / "average")) == [
        f"epoch_{n}.weights.h5" for n in (4, 5, 6)
    ]
    one = callbacks.AverageLastEpochs(str(tmp_path / "one"), epochs=1)
    assert _average(one, _model_with_weight(-1.0), range(3), 3) == 2.0
    # A window longer than the run averages every epoch.
    long = callbacks.AverageLastEpochs(str(tmp_path / "long"), epochs=9)
    assert _average(long, _model_with_weight(-1.0), range(2), 2) == 0.5
    with pytest.raises(ValueError, match="epochs must be >= 1"):
        callbacks.AverageLastEpochs(str(tmp_path), epochs=0)


def test_average_last_epochs_across_an_interruption(tmp_path):
    # Killed after epoch 5 of 6: a resumed run still averages 4, 5 and 6.
    average = callbacks.AverageLastEpochs(str(tmp_path), epochs=3)
    average.set_model(_model_with_weight(-1.0))
    average.set_params({"epochs": 6})
    average.on_train_begin()
    for epoch in range(5):
        average.model.set_weights([np.full((1, 1), epoch, "float32")])
        average.on_epoch_end(epoch)
    (tmp_path / "backup").mkdir()  # resume_callbacks' backup: resuming
    resumed = callbacks.AverageLastEpochs(str(tmp_path), epochs=3)
    assert _average(resumed, _model_with_weight(4.0), [5], 6) == 4.0
    assert resumed.averaged == [4, 5, 6]
    # Without a backup the run is a fresh one: the old epochs are dropped.
    (tmp_path / "backup").rmdir()
    fresh = callbacks.AverageLastEpochs(str(tmp_path), epochs=3)
    assert _average(fresh, _model_with_weight(-1.0), [5], 6) == 5.0
    assert fresh.averaged == [6]
    callbacks.finish_run(str(tmp_path))
    assert not (tmp_path / "average").exists()


def test_average_last_epochs_in_fit(tmp_path):
    # BatchNormalization's moving statistics (non-trainable floats) are
    # averaged with the rest.
    model = keras.Sequential(
        [
            keras.Input((2,)),
            keras.layers.Dense(3),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse")
    seen = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append(model.get_weights())
    )
    average = callbacks.AverageLastEpochs(str(tmp_path), epochs=2)
    x = np.random.default_rng(0).normal(size=(8, 2)).astype("float32")
    model.fit(x, x[:, :1], epochs=3, verbose=0, callbacks=[record, average])
    assert average.averaged == [2, 3]
    for got, a, b in zip(model.get_weights(), seen[1], seen[2]):
        np.testing.assert_allclose(got, (a + b) / 2, rtol=1e-6, atol=1e-7)


class _Epochs:
    epoch = None


class _Draws(keras.callbacks.Callback):
    """What each epoch starts with: NumPy's next draw and the dropout
    layer's seed state."""

    def __init__(self):
        super().__init__()
        self.draws = []

    def on_epoch_begin(self, epoch, logs=None):
        state = [
            v for v in self.model.variables if v.name == "seed_generator_state"
        ][0]
        self.draws.append(
            (np.random.randint(2**31), tuple(keras.ops.convert_to_numpy(state)))
        )


def _fit_reproducible(epochs, initial_epoch=0, seed=3):
    model = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dropout(0.5), keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
    dataset, draws = _Epochs(), _Draws()
    model.fit(
        np.ones((4, 2)),
        np.ones((4, 1)),
        epochs=epochs,
        verbose=0,
        initial_epoch=initial_epoch,
        callbacks=[callbacks.ReproducibleEpochs(seed, [dataset]), draws],
    )
    return dataset, draws.draws


def test_reproducible_epochs_follow_the_seed_and_the_epoch():
    dataset, draws = _fit_reproducible(3)
    assert dataset.epoch == 2
    assert len(set(draws)) == 3  # a new draw every epoch
    # A run resumed at epoch 2 starts that epoch as the whole run did.
    np.random.seed(99)
    _, resumed = _fit_reproducible(3, initial_epoch=2)
    assert resumed == draws[2:]
    _, other_seed = _fit_reproducible(3, seed=4)
    assert other_seed[0] != draws[0]


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="TensorFlow's global seed"
)
def test_reproducible_epochs_leave_tensorflows_global_seed_alone():
    # Setting it clears TensorFlow's kernel cache: each compiled function
    # would be optimised again at every epoch.
    import tensorflow as tf
    from tensorflow.python.eager import context

    tf.random.set_seed(11)
    _fit_reproducible(2)
    assert context.global_seed() == 11

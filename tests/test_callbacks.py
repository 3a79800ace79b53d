"""zoo.callbacks.StopAfterMinutes under the current backend, on a fake
clock: it stops when the next epoch would overrun the budget, counting only
the epochs a resumed run trains."""

import keras
import numpy as np
import pytest

from zoo import callbacks
from zoo.callbacks import StopAfterMinutes


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


def _fit(stopper, clock, initial_epoch=0):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=50,
                        initial_epoch=initial_epoch, verbose=0,
                        callbacks=[Tick(clock), stopper])
    return len(history.history["loss"])


@pytest.mark.parametrize("initial_epoch", [0, 20])
def test_stops_before_the_epoch_that_would_overrun(monkeypatch, capsys,
                                                   initial_epoch):
    clock = FakeClock(epoch_seconds=60)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    stopper = StopAfterMinutes(3.5, note="; --resume continues")
    # Epochs end at 1, 2, 3 minutes; a 4th would end at 4 > 3.5.
    assert _fit(stopper, clock, initial_epoch) == 3
    assert stopper.stopped
    assert "3.5-minute budget is spent; --resume continues" in (
        capsys.readouterr().out)


def test_an_ample_budget_never_stops(monkeypatch):
    clock = FakeClock(epoch_seconds=1)
    monkeypatch.setattr(callbacks.time, "perf_counter", clock)
    stopper = StopAfterMinutes(float("inf"))
    assert _fit(stopper, clock) == 50
    assert not stopper.stopped

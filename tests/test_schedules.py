"""zoo.schedules under the current backend."""

import keras
import numpy as np

from zoo.schedules import InverseSquareRootSchedule


def test_inverse_square_root_warms_up_then_decays():
    schedule = InverseSquareRootSchedule(5e-4, warmup_steps=400)
    values = [
        float(keras.ops.convert_to_numpy(schedule(s)))
        for s in (0, 200, 400, 1600)
    ]
    np.testing.assert_allclose(
        values, [1.25e-6, 2.5e-4, 5e-4, 2.5e-4], rtol=1e-5
    )
    clone = InverseSquareRootSchedule.from_config(schedule.get_config())
    assert clone.get_config() == schedule.get_config()
    config = keras.optimizers.Adam(schedule).get_config()
    assert config["learning_rate"]["class_name"] == "InverseSquareRootSchedule"
    keras.optimizers.Adam.from_config(config)  # restores through the registry


def test_warmup_cosine_rises_to_the_peak_then_decays_to_alpha():
    from zoo.schedules import warmup_cosine

    schedule = warmup_cosine(
        1e-3, total_steps=1000, warmup_fraction=0.1, alpha=0.1
    )
    value = lambda step: float(keras.ops.convert_to_numpy(schedule(step)))
    np.testing.assert_allclose(
        [value(0), value(50), value(100), value(550), value(1000)],
        [0.0, 5e-4, 1e-3, 5.5e-4, 1e-4],
        rtol=1e-4,
        atol=1e-9,
    )
    assert warmup_cosine(1.0, 5, 0.0).warmup_steps == 1  # at least one

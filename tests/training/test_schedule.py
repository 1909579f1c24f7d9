"""Learning-rate schedules and sizes, against their formulas: the warm-up and cosine, the ramp of
the notebooks' recipes, schedules counted in optimizer updates across phases, and progressive
resizing in steps of 16."""

import numpy as np
import pytest

from corolla import config


def test_schedule_matches_its_formula_at_chosen_steps():
    from corolla.training import learning_rate_schedule

    peak, total, warmup = 1e-3, 100, 10
    schedule = learning_rate_schedule(peak, total, warmup)
    expected = {
        0: peak / 10,  # the ramp starts at a tenth of the peak
        5: peak / 10 + (peak - peak / 10) * 5 / 10,  # linear ramp
        10: peak,
        55: peak * (0.99 * 0.5 * (1 + np.cos(np.pi * 45 / 90)) + 0.01),  # half way down
        100: peak * 0.01,  # cosine ends at 1% of the peak
    }
    for step, lr in expected.items():
        assert float(schedule(step)) == pytest.approx(lr, rel=1e-5), step


def test_progressive_resizing_ramps_in_steps_of_16_and_ends_at_the_input_size():
    from corolla.training import phases, schedule

    def sizes(final, epochs, **train):
        overrides = {"train.epochs": epochs, **{f"train.{k}": v for k, v in train.items()}}
        t = config.load_config(overrides=overrides).train
        return [schedule.size_at(t, final, e) for e in range(epochs)]

    # FFCV's ramp by fractions: 96 until half way (epoch 14), linear to 128 by 80% (22.4),
    # rounded down to multiples of 16.
    assert sizes(128, 28, start_size=96) == [96] * 19 + [112] * 4 + [128] * 5
    assert sizes(128, 5, start_size=0) == sizes(128, 5, start_size=160) == [128] * 5
    # The last epoch is at the input size even when the ramp ends with the training.
    assert sizes(48, 4, start_size=16, size_ramp_start=0, size_ramp_end=1) == [16, 16, 32, 48]
    assert sizes(200, 3, start_size=64, size_ramp_start=0.9, size_ramp_end=0.9) == [64, 64, 200]
    # Phases split where the size changes, and where two-phase fine-tuning unfreezes.
    t = config.load_config(overrides={"train.epochs": 6, "train.start_size": 16,
                                      "train.frozen_epochs": 2, "train.size_ramp_start": 0.4,
                                      "train.size_ramp_end": 0.6}).train
    assert [(p.start, p.end, p.frozen, p.size) for p in phases.phases(t, True, 32)] == [
        (0, 2, True, 16), (2, 4, False, 16), (4, 6, False, 32)]
    assert [(p.start, p.end, p.size) for p in phases.phases(t, True, 0)] == [(0, 2, 0), (2, 6, 0)]


STEPS = 3  # per epoch, in the schedule tests


def _at_epochs(schedule, epochs):
    import keras

    return {e: [float(keras.ops.convert_to_numpy(schedule(e * STEPS + i))) for i in (0, STEPS - 1)]
            for e in epochs}


def test_ramp_schedule_matches_the_tutorial_formula_with_the_notebook_constants():
    from corolla.training import ramp_schedule, ramp_value

    start, peak, low = 1e-5, 5e-5 * 8, 1e-5  # peak x 8 replicas
    schedule = ramp_schedule(start, peak, low, 5, 0, 0.8, STEPS)
    expected = {0: start, 4: start + (peak - start) * 4 / 5, 5: peak,
                6: (peak - low) * 0.8 + low, 10: (peak - low) * 0.8 ** 5 + low}
    for epoch, values in _at_epochs(schedule, expected).items():
        assert values == pytest.approx([expected[epoch]] * 2, rel=1e-5), epoch  # per epoch
        assert expected[epoch] == pytest.approx(ramp_value(epoch, start, peak, low, 5, 0, 0.8))


def test_xception_ramp_sustains_then_decays():
    from corolla.training import ramp_schedule

    start, peak, low = 1e-5, 1e-4 * 8, 1e-5
    schedule = ramp_schedule(start, peak, low, 3, 3, 0.5, STEPS)
    expected = {0: start, 2: start + (peak - start) * 2 / 3, 3: peak, 5: peak, 6: peak,
                7: (peak - low) * 0.5 + low, 9: (peak - low) * 0.125 + low}
    for epoch, values in _at_epochs(schedule, expected).items():
        assert values == pytest.approx([expected[epoch]] * 2, rel=1e-5), epoch


def test_schedules_count_optimizer_updates_and_continue_into_a_second_phase():
    import keras

    from corolla.training.schedule import for_training

    t = config.with_settings(config.RunConfig(), {
        "train.schedule": "ramp", "train.start_learning_rate": 1e-5,
        "train.learning_rate": 4e-4, "train.min_learning_rate": 1e-5,
        "train.warmup_epochs": 5, "train.lr_decay": 0.8}).train
    plain = for_training(t, STEPS)
    # 2 batches per update: micro-step 2k is update k; phase two starts at epoch 6, x 0.1.
    second = for_training(t, STEPS, accumulation=2, first_epoch=6, scale=0.1)
    value = lambda s, step: float(keras.ops.convert_to_numpy(s(step)))  # noqa: E731
    for update in (0, 2, 5):
        assert value(second, 2 * update) == pytest.approx(0.1 * value(plain, 6 * STEPS + update))
        assert value(second, 2 * update + 1) == value(second, 2 * update)


def test_later_epochs_of_other_steps_follow_the_schedule_epoch_by_epoch_to_its_floor():
    """A time plan made again after epoch 4 with epochs of 6 updates, not 10, after it."""
    import keras

    from corolla.training.schedule import for_training

    t = config.with_settings(config.RunConfig(), {
        "train.schedule": "cosine", "train.epochs": 8, "train.warmup_epochs": 1,
        "train.learning_rate": 1e-3, "train.min_learning_rate": 1e-5}).train
    plain = for_training(t, 10)
    later = for_training(t, 10, later=(4, 6))
    value = lambda s, step: float(keras.ops.convert_to_numpy(s(step)))  # noqa: E731
    # The same before epoch 4; then each update of a later epoch is 10/6 of the plan's.
    for update in (0, 9, 25, 40):
        assert value(later, update) == pytest.approx(value(plain, update))
    assert value(later, 43) == pytest.approx(value(plain, 45))
    assert value(later, 40 + 4 * 6) == pytest.approx(value(plain, 80))  # its floor, at the end
    assert value(plain, 80) == pytest.approx(1e-5)
    # A second phase's optimizer (from epoch 2, x 0.1, 2 micro-steps an update) alike.
    second = for_training(t, 10, accumulation=2, first_epoch=2, scale=0.1, later=(4, 6))
    assert value(second, 2 * 19) == pytest.approx(0.1 * value(plain, 39))
    assert value(second, 2 * (20 + 3)) == pytest.approx(0.1 * value(plain, 45))
    # One that starts after the change counts only epochs of 6.
    third = for_training(t, 10, first_epoch=5, later=(4, 6))
    assert value(third, 3) == pytest.approx(value(plain, 55))
    # The same steps: the plan's schedule itself.
    assert value(for_training(t, 10, later=(4, 10)), 43) == pytest.approx(value(plain, 43))


def test_a_thawed_phase_rises_from_near_zero_over_its_warmup_then_follows_the_schedule():
    """train.finetune_warmup_epochs: the optimizer of the thawed phase after a frozen one (from
    epoch 2, 10 updates an epoch, 2 micro-steps an update) rises over its first 1.5 epochs;
    the frozen phase and a run of one phase keep the schedule as it is."""
    import keras

    from corolla.training import phases
    from corolla.training.compiling import phase_schedule
    from corolla.training.schedule import for_training

    t = config.with_settings(config.RunConfig(), {
        "train.schedule": "cosine", "train.epochs": 8, "train.warmup_epochs": 0,
        "train.learning_rate": 1e-3, "train.frozen_epochs": 2, "train.accumulation_steps": 2,
        "train.finetune_warmup_epochs": 1.5}).train
    frozen, thawed = phases.phases(t, train_backbone=True)
    value = lambda s, step: float(keras.ops.convert_to_numpy(s(step)))  # noqa: E731
    plain, ramped = for_training(t, 10, 2, first_epoch=2, scale=0.1), phase_schedule(thawed, t, 20)
    for update in (0, 4, 14):  # (u + 1) / 15 of the plain rate
        assert value(ramped, 2 * update + 1) == pytest.approx(
            value(plain, 2 * update) * (update + 1) / 15, rel=1e-5), update
    for update in (15, 33, 59):  # the schedule itself once risen, to its floor
        assert value(ramped, 2 * update) == pytest.approx(value(plain, 2 * update)), update
    assert value(phase_schedule(frozen, t, 20), 0) == pytest.approx(1e-3)
    one = config.with_settings(config.RunConfig(), {"train.finetune_warmup_epochs": 1.5}).train
    assert value(phase_schedule(phases.phases(one, True)[0], one, 20), 0) == \
        pytest.approx(value(for_training(one, 20), 0))
    # A saved optimizer's schedule comes back with its warm-up.
    again = keras.optimizers.schedules.deserialize(
        keras.optimizers.schedules.serialize(ramped))
    assert value(again, 2 * 4) == pytest.approx(value(ramped, 2 * 4))

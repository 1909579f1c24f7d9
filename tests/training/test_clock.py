"""A time budget reads the clock it is handed (`runtime.clock`): its deadline, the pace it
measures and the seconds it counts, held exactly on a clock the test advances
(helpers.clock.StepClock), in milliseconds at any load."""

from types import SimpleNamespace

from corolla.training.timing import pacing
from corolla.training.backup import BackupState
from helpers.clock import StepClock


def _stop_in_time(deadline, history, clock, lines):
    from corolla.training.timing.stop import StopInTime

    checkpoint = SimpleNamespace(state=SimpleNamespace(history=history))
    stop = StopInTime(deadline, checkpoint, SimpleNamespace(multi_worker=False), "14s",
                      lines.append, clock)
    stop.set_model(SimpleNamespace(stop_training=False))
    return stop


def test_the_pace_of_an_epoch_is_measured_on_the_clock_handed_in():
    clock = StepClock()
    stop = _stop_in_time(pacing.Deadline(total=30.0, planned=(2.0, 2.0), planned_at=5.0,
                                         save=0.5, replan_after=1), [],
                         clock, [])
    stop.on_epoch_begin(0)
    clock.advance(1.5)  # the epoch's start and its step's tracing
    for batch in range(4):
        clock.advance(0.25)
        stop.on_train_batch_end(batch)
    assert stop.measured() == (0.25, 1.5)


def test_a_burst_of_other_work_during_a_few_steps_is_not_the_measured_pace():
    """The plan is made again for the host's pace: 2 of 11 steps slowed 12x by other work
    (the mean step would be 0.7 s) measure the other steps' 0.25 s; executions of 2 steps
    count as 2."""
    clock = StepClock()
    stop = _stop_in_time(pacing.Deadline(total=30.0, planned=(2.0, 2.0), planned_at=5.0,
                                         save=0.5, replan_after=1), [], clock, [])
    stop.on_epoch_begin(0)
    clock.advance(1.5)  # the epoch's start and its step's tracing
    for batch in range(1, 22, 2):
        clock.advance(6.0 if batch in (5, 7) else 0.5)
        stop.on_train_batch_end(batch)
    assert stop.measured() == (0.25, 1.5)


def test_a_run_that_fell_behind_stops_where_its_next_epoch_would_end_past_its_budget():
    deadline = pacing.Deadline(total=14.0, planned=(3.0, 1.0, 1.0, 1.0), planned_at=5.0,
                               save=0.5)
    lines = []
    # On its plan: epoch 3 would end at 9 + (1.1 + 0.5) s, inside 14.
    on_time = _stop_in_time(deadline, [{"seconds": 8.0}, {"seconds": 9.0}], StepClock(), lines)
    on_time.on_epoch_end(1)
    assert not on_time.model.stop_training and lines == []
    # Its second epoch took 4 s of a planned 1: epoch 3, as far behind, would end at 18.4 s.
    behind = _stop_in_time(deadline, [{"seconds": 8.0}, {"seconds": 12.0}], StepClock(), lines)
    behind.on_epoch_end(1)
    assert behind.model.stop_training
    assert lines == ["time 14s: stopping after epoch 2 of 4: its epochs took 4.00x the probe's "
                     "estimate, and epoch 3 would end at ~18 s of 14"]


def test_a_runs_seconds_are_counted_on_its_clock_after_those_of_the_sessions_before(tmp_path):
    from corolla.training.checkpoint import Checkpoint

    clock = StepClock()
    state = BackupState()
    state.history = [{"epoch": 1, "seconds": 7.5}]  # a killed session's
    checkpoint = Checkpoint(tmp_path, state, clock=clock)
    clock.advance(2.25)
    assert checkpoint.spent() == 9.75

"""The Keras callback that keeps a timed run to its deadline (`pacing.Deadline`): it stops the
run after the epoch whose next one would end past its budget, and times the epoch after which
the plan is made again (`plan.TimePlan.replan`).

Keras is imported here: the trainer imports this module in its methods, once the backend is
chosen."""

from __future__ import annotations

import itertools
import statistics

import keras

from corolla.runtime import collective


class StopInTime(keras.callbacks.Callback):
    """Stops a timed run after the epoch whose next one would end past its budget (the
    `plan.TimePlan`'s `pacing.Deadline`), with a line that says why. Placed after the
    checkpoint: it reads the row just committed. Every process stops where the chief does (its
    clock decides: the processes' own differ). In the epoch after which the plan is made again,
    it times the ends of the training batches (`measured`), on the run's `clock`
    (`clock.Clock`)."""

    def __init__(self, deadline, checkpoint, plan, budget_text: str, log, clock):
        super().__init__()
        self.deadline, self.checkpoint, self.plan = deadline, checkpoint, plan
        self.budget_text, self.log, self.clock = budget_text, log, clock
        self.began, self.ends = 0.0, []

    def on_epoch_begin(self, epoch, logs=None):
        self.began, self.ends = self.clock.now(), []

    def on_train_batch_end(self, batch, logs=None):
        if len(self.checkpoint.state.history) + 1 == self.deadline.replan_after:
            self.ends.append((batch, self.clock.now()))

    def measured(self) -> tuple[float, float] | None:
        """(seconds a step, seconds of tracing) of the epoch just trained, from the ends of its
        executions of steps: a step as the median execution after the first took (other work
        on the host that slows a few of them is not the pace the plan is made again for, and
        a plan made from it would leave the rest of the budget unused), the tracing as the
        first took beyond its steps (the epoch's start with it); None where it had fewer than
        three executions."""
        if len(self.ends) < 3:
            return None
        first, at = self.ends[0]
        step = statistics.median((end - before) / (batch - earlier) for (earlier, before),
                                 (batch, end) in itertools.pairwise(self.ends))
        return step, max(at - self.began - (first + 1) * step, 0.0)

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 == self.deadline.replan_after:  # the plan is made again after it
            return
        history = self.checkpoint.state.history
        end = self.deadline.next_end(history)
        over = end is not None and end > self.deadline.total
        if self.plan.multi_worker:
            over = bool(collective.gather(self.plan, [int(over)])[0, 0])
        if not over:
            return
        if end is not None and not self.model.stop_training:
            self.log(f"time {self.budget_text}: stopping after epoch {epoch + 1} of "
                     f"{len(self.deadline.planned)}: its epochs took "
                     f"{self.deadline.behind(history):.2f}x the probe's estimate, and epoch "
                     f"{epoch + 2} would end"
                     f"{' with its refit' if self.deadline.refit_each else ''} at ~{end:.0f} s "
                     f"of {self.deadline.total:.0f}")
        self.model.stop_training = True

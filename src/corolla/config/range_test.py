"""The settings of the learning-rate range test (`corolla lr-find`, `corolla train --lr find`;
the test itself is `training.range_test`): what it sweeps and how it reads the curve, checked before
anything heavy is imported."""

from __future__ import annotations

import math
from dataclasses import dataclass

from corolla.errors import UserError

START, END, STEPS = 1e-7, 10.0, 100  # fastai's defaults (Lightning's: 1e-8 to 1, 100 steps)
BETA = 0.98  # the loss's smoothing (fastai's and Lightning's)
DIVERGED = 4.0  # stop once the smoothed loss is above this times its best
SKIP_BEGIN, SKIP_END = 10, 1  # what the steepest descent leaves out (Lightning's)
SLOPE_SPAN = 10  # steepest: a point's slope is measured across a tenth of the steps around it
MIN_STEPS = 20  # below this the rule has nothing to read (SKIP_BEGIN + a few)
# A point is a training step: 10,000 is far past any curve worth reading (fastai's and
# Lightning's 100), and bounds the per-point arrays the test keeps.
MAX_STEPS = 10_000
# --lr find (`corolla train`, `corolla.train(learning_rate="find")`): the rate the range test
# suggests. Here, below the command line, because the run's flow reads it too.
FIND = "find"
RULES = {"steepest": "steepest descent of the smoothed loss",
         "minimum": "the smoothed loss's minimum / 10"}


@dataclass(frozen=True)
class RangeSettings:
    """What the test sweeps: `steps` rates from `start` to `end`, read by `rule`."""
    start: float = START
    end: float = END
    steps: int = STEPS
    rule: str = "steepest"

    def checked(self, names: dict | None = None) -> RangeSettings:
        """Itself, or a one-line UserError naming the flag (`names`: "start" -> "--start")."""
        names = names or {}

        def name(key):
            return names.get(key, f"--{key}")

        for key in ("start", "end"):
            value = getattr(self, key)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UserError(f"{name(key)} must be a positive rate, got {value!r}")
        if self.start >= self.end:
            raise UserError(f"{name('start')} ({self.start:g}) must be below {name('end')} "
                            f"({self.end:g}): the rate grows from one to the other")
        if not isinstance(self.steps, int) or isinstance(self.steps, bool) \
                or not MIN_STEPS <= self.steps <= MAX_STEPS:
            raise UserError(f"{name('steps')} must be a whole number from {MIN_STEPS} (the "
                            f"steepest descent leaves out the first {SKIP_BEGIN}) to {MAX_STEPS} "
                            f"(each is a training step), got {self.steps!r}")
        if self.rule not in RULES:
            raise UserError(f"{name('rule')} must be one of {', '.join(RULES)}, got "
                            f"{self.rule!r}")
        return self

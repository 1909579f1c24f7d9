"""The clock a time budget reads: the probe's timings, the plan, the deadline, the plan made
again and the refit's plan all ask one `Clock` for the time, handed down from where the
command started, so that a test can hand in a clock of its own (advanced by the steps taken)
and hold what a budget does exactly, whatever the host's load."""

from __future__ import annotations

import time


class Clock:
    """Monotonic seconds: the host's (`time.monotonic`)."""

    def now(self) -> float:
        return time.monotonic()

    def since(self, began: float) -> float:
        """Seconds from `began` (an earlier `now`) to now."""
        return self.now() - began


SYSTEM_CLOCK = Clock()


def default_clock() -> Clock:
    """The clock of a run handed none: the host's (read at each call: a test of the command
    line may put its own in `SYSTEM_CLOCK`'s place)."""
    return SYSTEM_CLOCK

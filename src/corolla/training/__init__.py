"""Training: a run's settings resolved once (`settings`), the fit loop (`fit`), its checkpoints
(`checkpoint`), callbacks, optimizers and schedules (`schedule`).

Importing this package does not import Keras (the backend is chosen first)."""

from corolla.training.fit import TrainResult, compile_model, run
from corolla.training.settings import resolve
from corolla.training.schedule import learning_rate_schedule, ramp_schedule, ramp_value

__all__ = ["TrainResult", "compile_model", "learning_rate_schedule", "ramp_schedule",
           "ramp_value", "resolve", "run"]


"""Training: a run's settings resolved once (`settings`), the run's story (`fit`) told by one
module per step (`preparing`, `trainer`, `time_plan`, `saving`...), its checkpoints
(`checkpoint`), callbacks, optimizers and schedules (`schedule`).

Importing this package does not import Keras (the backend is chosen first)."""

from corolla.training.compiling import compile_model
from corolla.training.fit import run
from corolla.training.saving import TrainResult
from corolla.training.settings import resolve
from corolla.training.schedule import learning_rate_schedule, ramp_schedule, ramp_value

__all__ = ["TrainResult", "compile_model", "learning_rate_schedule", "ramp_schedule",
           "ramp_value", "resolve", "run"]

"""Training: the fit loop (`fit`), its checkpoints (`checkpoint`) and schedules (`schedule`).

Importing this package does not import Keras (the backend is chosen first)."""

from corolla.train.fit import TrainResult, compile_model, resolve, run
from corolla.train.schedule import learning_rate_schedule, ramp_schedule, ramp_value

__all__ = ["TrainResult", "compile_model", "learning_rate_schedule", "ramp_schedule",
           "ramp_value", "resolve", "run"]


# `corolla.train(data=..., epochs=...)` is the notebook API's train (`corolla.api.train`): once
# imported, this package is what `corolla.train` names, so the package itself is callable.
import sys as _sys  # noqa: E402
import types as _types  # noqa: E402


class _CallablePackage(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        from corolla.api import train

        return train(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallablePackage

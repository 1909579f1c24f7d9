"""Training: a run's settings resolved once (`settings`), the run's story (`fit`) told by one
module per step (`preparing`, `trainer`, `timing`, `saving`...), its backups (`backup`,
written by `checkpoint`), callbacks, optimizers and schedules (`schedule`).

Importing this package does not import Keras (the backend is chosen first).

    backup: what a run's backup folder holds (state.json, weights, history.csv), without Keras
    callbacks: Corolla's own callbacks: the competition metric after every epoch (EMA weights)
    checkpoint: the Keras callback that commits the backup each epoch, safe to kill at any moment
    compiling: a model compiled for training (optimizer, loss, metric), for a run or a phase
    features: frozen features, computed once while the backbone is frozen; the head trains on them
    linear_head: a timed run's floor: a logistic regression on the frozen features, the best so far
    fit: `run(config, plan)`: a run's story from its settings to its saved model, its folder
    optimizer: the optimizer a TrainConfig asks for (Adam, AdamW, SGD), EMA, accumulation
    phases: the phase plan of a run (frozen head, fine-tuning, resizing) and what each freezes
    preparing: what a run decides before its model is built: settings, backup, seeds, epochs
    range_test: the learning-rate range test: the rate grown exponentially, the loss recorded
    refit: the validated run trained again on train + val, saved as refit.keras
    resuming: continuing a run from its backup on every process, at the chief's epoch
    saving: the end of training: last.keras, model.keras, the backup removed, safe at every step
    schedule: learning-rate schedules evaluated on the optimizer's own step counter
    settings: a run's settings resolved once from its config, the plan and the data
    thawed: a thawed top trained on its frozen lower part's outputs, computed once per view
    timing: a run's time budget: its plan's arithmetic, probe, plan and deadline, one home
    trainer: the fit loop: the model built, compiled, fed its stream per phase, with callbacks
"""

from corolla.training.compiling import compile_model
from corolla.training.fit import run
from corolla.training.saving import TrainResult
from corolla.training.settings import resolve
from corolla.training.schedule import learning_rate_schedule, ramp_schedule, ramp_value

__all__ = ["TrainResult", "compile_model", "learning_rate_schedule", "ramp_schedule",
           "ramp_value", "resolve", "run"]

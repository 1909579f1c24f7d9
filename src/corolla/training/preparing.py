"""What a run decides before its model is built: its settings resolved, the run it continues
claimed and its backup read (the epoch every process continues from), seeds set, the epoch's
length in whole executions and accumulations.

Keras is imported in `set_determinism`: the backend is chosen first."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf
# Not exported by TensorFlow, but enable_op_determinism's counterpart (tests use it the same way).
from tensorflow.python.framework import config as tf_config

from corolla.config import RunConfig, TrainConfig, with_settings
from corolla.data.layout import Layout
from corolla.errors import UserError
from corolla.runs import paths, rundir
from corolla.runtime import Plan, collective
from corolla.runtime.hardware import worker_scratch
from corolla.training.timing import pacing
from corolla.training import phases as phases_lib
from corolla.training.backup import BackupState, read_state
from corolla.training.resuming import agree_on_epoch
from corolla.training.settings import resolve


@dataclass(frozen=True)
class Prepared:
    """What training needs before the first epoch, found before any folder is made."""
    config: RunConfig  # resolved
    layout: Layout
    run_dir: Path | None  # the run continued (chief), None for a new run or a worker
    backup_dir: Path | None  # a worker's; the chief's is inside its run folder
    state: BackupState
    steps: int  # per epoch
    steps_per_execution: int
    # Where every process takes the chief's weights: the chief's backup file (see
    # resuming.agree_on_epoch), else None.
    chiefs_file: str | None
    # Where a time budget's plan, made in this session, stops short (None: no budget, or one
    # planned in an earlier session).
    deadline: pacing.Deadline | None = None

    @property
    def from_chief(self) -> bool:
        return self.chiefs_file is not None

    @property
    def phases(self) -> list[phases_lib.Phase]:
        return phases_lib.of_config(self.config)

    @property
    def progressive(self) -> bool:
        return phases_lib.progressive(self.phases, self.config.model.input_size)

    @property
    def to_plan(self) -> bool:
        """Whether a time budget is still to be planned (a resumed run continues the plan its
        config holds)."""
        return bool(self.config.train.time_budget) and not self.config.train.time_plan

    @property
    def unit(self) -> int:
        """What an epoch's steps are a multiple of (`epoch_unit`)."""
        return epoch_unit(self.steps_per_execution, self.config.train.accumulation_steps)

    @property
    def later_steps(self) -> int:
        """The steps of the epochs from train.time_steps_from (a plan made again mid-run), in
        whole units; 0 where every epoch has `steps`."""
        t = self.config.train
        if not t.time_steps_from or not t.time_steps_later:
            return 0
        return max(t.time_steps_later // self.unit, 1) * self.unit

    def steps_at(self, epoch: int) -> int:
        """The steps of `epoch` (from 0)."""
        later = self.later_steps
        return later if later and epoch >= self.config.train.time_steps_from else self.steps

    def planned(self, config: RunConfig, steps: int,
                made: pacing.Deadline | None = None) -> Prepared:
        """This, with another config and steps per epoch (whole units already): a time
        plan's, with its epochs as measured (`made`), or the learning rate found."""
        return dataclasses.replace(self, config=config, steps=steps, deadline=made)


def prepare(config: RunConfig, plan: Plan, log, resume: Path | None) -> Prepared:
    """Resolves the settings, claims the run to continue and reads its backup, and fixes the
    epoch's length: everything decided before a model is built."""
    asked = config.train
    config, layout = resolve(config, plan, resume=resume is not None, log=log)
    if asked.scale_lr == "replicas":
        log(f"peak learning rate {asked.learning_rate:g} x {plan.replicas} replica(s) = "
            f"{config.train.learning_rate:g} (train.scale_lr = replicas)")
    # Every process trains the chief's run: its id keys the workers' scratch folders, so a
    # resumed worker finds its own backup and a new run never meets an old one's.
    run_id = collective.chief_hex(plan, config.output.run_id)
    config = with_settings(config, {"output.run_id": run_id})
    run_dir = Path(resume) if resume and plan.is_chief else None
    if run_dir:
        rundir.claim(run_dir, log)  # before its backup is read: one writer per run
    backup_dir = (run_dir / paths.BACKUP if run_dir else None) if plan.is_chief else \
        worker_scratch(run_id, plan.process_id) / paths.BACKUP
    state = read_state(backup_dir) if resume else BackupState()
    state, chiefs_file = agree_on_epoch(plan, state, backup_dir, log)
    set_determinism(config, plan)
    steps, steps_per_execution = epoch_steps(config.train, plan, log)
    return Prepared(config, layout, run_dir, backup_dir, state, steps, steps_per_execution,
                    chiefs_file)


def set_determinism(config: RunConfig, plan: Plan) -> None:
    """Seeds Python, NumPy and the backend with train.seed; on TensorFlow, turns op
    determinism on or off as train.deterministic says."""
    import keras

    keras.utils.set_random_seed(config.train.seed)
    if plan.backend == "tensorflow":
        # Process-wide: a deterministic run before this one (the Python API) must not leave it
        # on, which would also make Keras drop the plan's XLA without a word.
        if config.train.deterministic:
            tf.config.experimental.enable_op_determinism()
        else:
            tf_config.disable_op_determinism()


def epoch_unit(steps_per_execution: int, accumulation_steps: int) -> int:
    """What an epoch's steps are a multiple of: whole executions, and with gradient
    accumulation whole accumulations, so that every epoch ends on an optimizer update."""
    return math.lcm(steps_per_execution, accumulation_steps)


def epoch_steps(t: TrainConfig, plan: Plan, log) -> tuple[int, int]:
    """(steps per epoch, steps per execution): whole units (`epoch_unit`); a time plan's
    shortened epochs once planned."""
    asked = t.time_steps or t.steps_per_epoch
    steps, steps_per_execution = plan.fit_steps(asked)
    if t.accumulation_steps > 1:
        unit = epoch_unit(steps_per_execution, t.accumulation_steps)
        if steps < unit:
            raise UserError(f"an epoch of {steps} steps is shorter than one accumulation of "
                            f"{t.accumulation_steps} batches; lower train.accumulation_steps "
                            f"or raise --steps-per-epoch")
        steps -= steps % unit
    if steps != asked:
        log(f"{asked} steps per epoch rounded to {steps}, a multiple of the "
            f"{steps_per_execution} steps the accelerator runs per call"
            + (f" and of the {t.accumulation_steps} accumulated batches per update"
               if t.accumulation_steps > 1 else ""))
    return steps, steps_per_execution

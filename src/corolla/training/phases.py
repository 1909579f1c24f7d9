"""The phase plan of a run (frozen head, then fine-tuning; split where progressive resizing
changes the image size) and what each phase freezes: the backbone, the bottom of it, its
BatchNorm layers.

Keras is imported in the functions that need it: the backend is chosen first."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from corolla.config import RunConfig, TrainConfig
from corolla import models
from corolla.errors import UserError
from corolla.training import schedule


@dataclass(frozen=True)
class Phase:
    """Epochs [start, end) trained with the backbone frozen or not, at the schedule x lr_scale,
    on `size` px images (0: the model's input size)."""
    start: int
    end: int
    frozen: bool
    lr_scale: float = 1.0
    size: int = 0

    def same_optimizer(self, other: Phase) -> bool:
        """Whether `other` trains with this phase's compiled model (only its images' size
        differs), so that moving on needs no new optimizer."""
        return (self.frozen, self.lr_scale) == (other.frozen, other.lr_scale)


def phases(train: TrainConfig, train_backbone: bool, size: int = 0) -> list[Phase]:
    """Two-phase fine-tuning: the head alone for train.frozen_epochs, then everything at the
    schedule's rate x train.finetune_lr_scale; one phase otherwise. With progressive resizing
    (train.start_size, for a model of `size` px), each is split where the image size changes."""
    n = min(train.frozen_epochs, train.epochs) if train_backbone else 0
    if not n:
        split = [Phase(0, train.epochs, frozen=not train_backbone)]
    else:
        split = [Phase(0, n, frozen=True), Phase(n, train.epochs, False, train.finetune_lr_scale)]
    out = []
    for p in split:
        for epoch in range(p.start, p.end):
            at = schedule.size_at(train, size, epoch)
            if out and out[-1].end == epoch and out[-1].size == at and p.same_optimizer(out[-1]):
                out[-1] = dataclasses.replace(out[-1], end=epoch + 1)
            else:
                out.append(dataclasses.replace(p, start=epoch, end=epoch + 1, size=at))
    return out


def optimizer_start(plan_phases: list[Phase], epoch: int) -> int:
    """The first epoch of the optimizer that trains `epoch` (from 0): the phases before it
    that share it (`same_optimizer`: progressive resizing splits a phase where the size
    changes) count their steps on it from their first."""
    at = [k for k, p in enumerate(plan_phases) if p.start <= epoch < p.end]
    if not at:
        return epoch
    k = at[0]
    while k and plan_phases[k - 1].same_optimizer(plan_phases[k]):
        k -= 1
    return plan_phases[k].start


def split_at(plan_phases: list[Phase], epoch: int) -> list[Phase]:
    """`plan_phases` with the one that holds `epoch` (from 0) split in two there (they share
    its optimizer); as they are where none does (or `epoch` is 0)."""
    out = []
    for p in plan_phases:
        if p.start < epoch < p.end:
            out += [dataclasses.replace(p, end=epoch), dataclasses.replace(p, start=epoch)]
        else:
            out.append(p)
    return out


def of_config(config: RunConfig) -> list[Phase]:
    """The phases of a run's config, at its input size."""
    return phases(config.train, config.model.train_backbone, config.model.input_size)


def progressive(plan_phases: list[Phase], size: int) -> bool:
    """Whether the phases train at another size than the model's `size` (progressive
    resizing)."""
    return any(p.size != size for p in plan_phases)


def epochs_text(phase: Phase) -> str:
    """A phase's epochs as the log counts them (from 1): "epoch 3" or "epochs 3-5"."""
    if phase.end - phase.start == 1:
        return f"epoch {phase.end}"
    return f"epochs {phase.start + 1}-{phase.end}"


def backbone_of(model):
    """The backbone inside a model from models.create_model: its one nested model."""
    import keras

    nested = [layer for layer in model.layers if isinstance(layer, keras.Model)]
    if len(nested) != 1:
        raise UserError(f"model {model.name!r} has no single backbone to freeze "
                        f"(train.frozen_epochs, train.unfreeze_fraction); set "
                        f"train.frozen_epochs = 0 and train.unfreeze_fraction = 1")
    return nested[0]


def batchnorm_layers(model) -> list:
    """Every BatchNormalization layer inside `model`, nested models and blocks included."""
    import keras

    return [layer for layer in models.sublayers(model)
            if isinstance(layer, keras.layers.BatchNormalization)]


def below_unfrozen(backbone, fraction: float) -> list:
    """The layers of `backbone` that stay frozen when only its top `fraction` trains: the
    bottom `1 - fraction` of its weighted layers, in their order from the input (a functional
    model lists them so). No gradient flows below the lowest trained layer."""
    import keras

    weighted = [layer for layer in models.sublayers(backbone)
                if layer.weights and not isinstance(layer, keras.Model)]
    return weighted[:round(len(weighted) * (1 - fraction))]


def batchnorm_inference(config: RunConfig) -> bool:
    """Whether a trained (unfrozen) backbone keeps its BatchNorm in inference mode:
    train.batchnorm, whose "auto" means yes for pre-trained weights, no from scratch."""
    mode = config.train.batchnorm
    if mode == "auto":
        return config.model.weights not in ("", "none")
    return mode == "inference"


def freeze(backbone, phase: Phase, unfreeze_fraction: float, frozen_bn: bool) -> None:
    """`backbone` frozen for `phase`, or thawed down to its top `unfreeze_fraction`, its
    BatchNorm layers kept frozen with `frozen_bn` (in inference mode, a BatchNorm layer
    normalises with its moving statistics and leaves them, its scale and its offset alone:
    Keras 3's `trainable = False` does both)."""
    backbone.trainable = not phase.frozen
    if not phase.frozen:
        still_frozen = below_unfrozen(backbone, unfreeze_fraction)
        if frozen_bn:
            still_frozen += batchnorm_layers(backbone)
        for layer in still_frozen:
            layer.trainable = False

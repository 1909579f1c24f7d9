"""Augmentation names and policies: what `data.augment` may say. No TensorFlow here: the config
checks the names when it loads (`resolve`), the pipeline applies them (see `augment`)."""

from __future__ import annotations

from corolla.errors import UserError

# In the order they are applied: crop while decoding, then whole batches.
NAMES = ("crop", "flip", "affine", "color", "randaugment", "mixup", "cutmix")
POLICIES = {
    "none": (),
    # Cheap enough that a CPU host's training pipeline stays near its JPEG-decoding speed
    # (`corolla bench data` measures it; figures: docs/benchmarks.md#input-pipeline).
    "default": ("flip", "color"),
    # For long runs of large models, where the accelerator, not the input, sets the pace.
    "strong": ("crop", "flip", "affine", "color", "cutmix"),
}
NEED_ONE_HOT = ("mixup", "cutmix")  # they mix labels too


def resolve(value, label: str = "data.augment") -> list[str]:
    """true/false (older configs), a policy name, a comma-separated string of names or a list of
    names -> the names, in the order they are applied (the form saved with a run)."""
    if isinstance(value, bool):
        return list(POLICIES["default" if value else "none"])
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return resolve(text == "true")
        if text in POLICIES:
            return list(POLICIES[text])
        value = [] if text in ("", "[]") else text.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise UserError(f"{label} must be a policy ({', '.join(POLICIES)}) or a list of "
                        f"augmentation names, got {value!r}")
    names = {v.strip().lower() for v in value}
    unknown = sorted(names - set(NAMES))
    if unknown:
        raise UserError(f"{label}: unknown augmentation {', '.join(map(repr, unknown))}; names "
                        f"are {', '.join(NAMES)}, policies {', '.join(POLICIES)}")
    return [n for n in NAMES if n in names]

"""The backbone ladder: which EfficientNet-Lite rung (backbone and input size) a timed run
extracts its features with, from the weights it can have, the budget and the host's pace.

With features first, a larger backbone costs one forward pass per view of each photo. The
rungs, smallest first: Lite0 at the `cpu-finetune` recipe's 192 px, Lite0 at its native 224,
Lite1 at 240, Lite2 at 260. Where they come from:

- locally: `--weights DIR`, where DIR is a folder of keras-hub preset folders (as
  ../shared/weights is) rather than one preset: the Lite presets in it are the ladder. A preset
  folder named itself (`--weights DIR/efficientnet_lite0_imagenet`) is a choice, taken as given;
- online (no --weights): keras-hub's downloadable presets of the family (`ONLINE`: keras-hub
  0.32 publishes Lite0 alone, `efficientnet_lite0_ra_imagenet`), so the ladder is its two
  sizes. Nothing here touches the network: whether that preset can be had is decided as before, in
  seconds (`hub.availability`).

A rung is climbed only where the suite's linear probes say it earns its time (`SUITE`: its
mean test macro F1 over the sets against the first rung's at least `MIN_GAIN`, and no set
below it) AND its forward passes over the run's photos (the labelled ones' features and their
mirror images', the test split's predictions) fit `SHARE` of the budget at the host's
measured pace; of those, the one that gained most (on the suite Lite1 gains more than Lite2).
`choose` is the rule, pure; `local_rungs` reads the folders; `measure` times the
foot's forward pass, only where a climb is possible at all.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

import numpy as np

from corolla.files import MAX_TEXT, check_regular
from corolla.models import factory

# The family, as keras-hub's EfficientNetBackbone config says it: ReLU6 and no squeeze-excite,
# each rung by its (width, depth) coefficients; Lite models keep the first and last stage's
# depth at 1.0, so the depth read is the largest of the stages'.
LITE = {(1.0, 1.0): "lite0", (1.0, 1.1): "lite1", (1.1, 1.2): "lite2", (1.2, 1.4): "lite3",
        (1.4, 1.8): "lite4"}
FIRST = ("lite0", 192)  # the recipe's own backbone and size: the ladder's foot
FIRST_MODEL = "efficientnet_lite0"  # its registered name (`hub.LITE0`)
# Each rung the suite measured (`python benchmarks/suite.py probe --levers`, docs/
# benchmarks.md, "The linear head's levers"): (its forward pass's seconds an image against the
# foot's: the best of 6 batches of 16 on a loaded host; its linear probe's mean and
# worst test macro F1 gain over the foot's on the suite's sets, each head as a run submits it:
# fit on train + val at `linear_head.C`: the table's "train+val C1" column).
SUITE: dict[tuple[str, int], tuple[float, float, float]] = {
    ("lite0", 192): (1.0, 0.0, 0.0),
    ("lite0", 224): (1.42, 0.0088, 0.0009),
    ("lite1", 240): (2.13, 0.0284, 0.0157),
    ("lite2", 260): (2.27, 0.0088, -0.0081),
}
MIN_GAIN = 0.01  # a climb's mean gain on the suite, at least (and no set worse)
SHARE = 0.25  # of the budget, at most, for a climbed rung's forward passes
ONLINE = ("lite0",)  # keras-hub's downloadable presets of the family (keras-hub 0.32)


@dataclass(frozen=True)
class Rung:
    name: str  # "lite0"
    weights: str  # its keras-hub preset folder, or "imagenet" (keras-hub's preset)
    size: int  # the input size it is used at


def family(folder: str) -> str | None:
    """The Lite rung ("lite0" ...) a keras-hub preset folder holds, from its config.json;
    None for any other preset or folder."""
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        return None
    check_regular(path, "preset config", MAX_TEXT)
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        config = saved["config"]
        if saved.get("class_name") != "EfficientNetBackbone" or \
                config.get("activation") != "relu6" or \
                any(config.get("stackwise_squeeze_and_excite_ratios") or [1]):
            return None
        width = max(config["stackwise_width_coefficients"])
        depth = max(config["stackwise_depth_coefficients"])
    except (ValueError, KeyError, TypeError, AttributeError):
        return None  # not a config keras-hub wrote for this family: no rung
    return LITE.get((round(float(width), 3), round(float(depth), 3)))


def is_shelf(folder: str) -> bool:
    """Whether `folder` is a folder of preset folders (no preset itself) holding a Lite one."""
    return os.path.isdir(folder) and not os.path.isfile(os.path.join(folder, "config.json")) \
        and bool(local_rungs(folder))


def local_rungs(folder: str) -> list[Rung]:
    """The ladder's rungs of the Lite preset folders directly in `folder` (one folder a
    rung: the first in name order where two hold the same), smallest first."""
    found: dict[str, str] = {}
    for entry in sorted(os.listdir(folder)):
        path = os.path.join(folder, entry)
        name = family(path) if os.path.isdir(path) else None
        if name is not None and name not in found:
            found[name] = os.path.abspath(path)
    return [Rung(name, found[name], size) for name, size in SUITE if name in found]


def online_rungs() -> list[Rung]:
    """The rungs keras-hub's downloadable presets give (`ONLINE`)."""
    return [Rung(name, "imagenet", size) for name, size in SUITE if name in ONLINE]


def earns(rung: Rung, suite=None, min_gain: float = MIN_GAIN) -> bool:
    """Whether the suite measured `rung` (`SUITE`) above the foot by `min_gain` on the mean of
    its sets, and below it on none."""
    found = (SUITE if suite is None else suite).get((rung.name, rung.size))
    return found is not None and found[1] >= min_gain and found[2] >= 0


def climbable(rungs: list[Rung], suite=None, min_gain: float = MIN_GAIN) -> bool:
    """Whether a rung above the first of `rungs` earns its time (`earns`): only then is the
    host's pace worth measuring."""
    return any(earns(r, suite, min_gain) for r in rungs[1:])


def choose(rungs: list[Rung], budget: float | None, images: int,
           seconds_an_image: float | None, suite=None, min_gain: float = MIN_GAIN,
           share: float = SHARE) -> tuple[Rung, str]:
    """(the rung, why in a few words): of `rungs` (the foot first), the one that gains the most
    on the suite (`suite`, default `SUITE`) among those that earn their time (`earns`) and
    whose forward passes over `images` photos fit `share` of `budget` seconds, at
    `seconds_an_image` for the foot scaled by each rung's relative cost; else the foot. A
    larger rung is not better by itself: the gains decide, not the size. `budget` None (no
    --time) or a pace unmeasured (None): the foot."""
    suite = SUITE if suite is None else suite
    if not rungs:
        raise ValueError("no rung to choose from")
    first = rungs[0]
    if len(rungs) == 1:
        return first, f"{_named(first)}, the only rung of the Lite ladder here"
    earning = sorted((r for r in rungs[1:] if earns(r, suite, min_gain)),
                     key=lambda r: (-suite[(r.name, r.size)][1], suite[(r.name, r.size)][0]))
    if not earning:
        best = max(rungs[1:], key=lambda r: suite.get((r.name, r.size), (0, -1, -1))[1])
        mean, worst = suite.get((best.name, best.size), (0, float("nan"), float("nan")))[1:]
        return first, (f"{_named(first)}: no larger rung earns its time on the suite's linear "
                       f"probes (the best, {_named(best)}, {mean:+.3f} mean, {worst:+.3f} "
                       f"worst; {min_gain:+.2f} needed)")
    if budget is None or seconds_an_image is None:
        return first, f"{_named(first)}: no --time to fit a larger rung's features in"
    allowed = share * budget

    def seconds(rung: Rung) -> float:
        return images * seconds_an_image * suite[(rung.name, rung.size)][0] / \
            suite[(first.name, first.size)][0]

    for rung in earning:
        if seconds(rung) <= allowed:
            return rung, (f"{_named(rung)}: its forward passes over {images} images take ~"
                          f"{seconds(rung):.0f} s here, within {share:.0%} of {budget:.0f} s, "
                          f"and its linear probe gains {suite[(rung.name, rung.size)][1]:+.3f} "
                          f"on the suite")
    cheapest = min(earning, key=seconds)
    return first, (f"{_named(first)}: {_named(cheapest)}'s forward passes over {images} images "
                   f"would take ~{seconds(cheapest):.0f} s here, over {share:.0%} of "
                   f"{budget:.0f} s")


def _named(rung: Rung) -> str:
    return f"EfficientNet-{rung.name.capitalize()} at {rung.size} px"


def measure(rung: Rung, batch: int = 8, repeats: int = 3) -> float:
    """Seconds an image of the foot's frozen forward pass on this host (`rung`: the foot,
    Lite0; its size is what counts): its architecture alone, no weights read or downloaded
    (the pace does not depend on them), the best of `repeats` batches of `batch` after one that
    builds the graph. A few seconds on an idle host, more on a busy one."""
    model = factory.create_model(FIRST_MODEL, 2, rung.size, weights=None, train_backbone=False)
    images = np.random.default_rng(0).uniform(0, 255, (batch, rung.size, rung.size, 3)) \
        .astype("float32")
    model.predict_on_batch(images)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        model.predict_on_batch(images)
        times.append(time.perf_counter() - began)
    return min(times) / batch

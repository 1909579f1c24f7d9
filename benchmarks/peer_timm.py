"""The peer: PyTorch + timm fine-tuning the same EfficientNet-Lite0 weights on the same data
for the same wall-clock budget as `corolla train --time T`, written as a competent user would.

    python benchmarks/peer_timm.py --time 6m [--seed 42] [--size 192] [--batch 32]
        [--lr 1e-3] [--data ../shared/data/flowers5]
        [--weights ../shared/weights/efficientnet_lite0_imagenet] [--tiny] [--check]
        [--profile]

Needs torch, torchvision and timm beside Corolla's packages (a benchmark's extra, not the
package's): `pip install torch torchvision timm` into the environment Corolla is installed in
(TensorFlow reads the records: the same bytes Corolla trains on; torchvision's wheel must match
torch's build, so take both from the same index).

- The model: timm's `tf_efficientnet_lite0` (TensorFlow's SAME padding, batch-norm epsilon
  1e-3: what these TensorFlow-trained weights were trained with), its backbone's weights copied
  from the keras-hub preset folder layer by layer (each convolution and batch norm in order;
  shapes checked), a new 5-class head. The copy is checked before training: the pooled
  features of the 8 reference photos of ../shared/weights/efficientnet_lite0_reference.npz
  must equal `features_same` (printed: the largest difference).
- Input (x - 127) / 128 of uint8 RGB, as the weights were trained.
- Training: AdamW (weight decay 0.01), label smoothing 0.1, RandomResizedCrop(size, scale
  0.35-1) and horizontal flips, batch `--batch`; one epoch of linear warm-up, then a cosine to
  zero over the epochs that fit: those are planned from a timed first epoch (the time left
  after it, 95% of it, over an epoch's measured seconds with its validation), so the schedule
  ends when the time does. Validation (macro F1, scikit-learn's) after every epoch; the best
  epoch's score is the result, as Corolla keeps its best epoch.
- The clock starts when the script starts (imports, reading the records and building the model
  count, as Corolla's start and probe count against its budget).

Printed: each epoch's seconds, loss and val macro F1, the best, the seconds used of the budget
and the host's load (os.getloadavg) beside them. PyTorch's CPU step slows several times as soon
as another process shares the cores: measure it on an idle host, one run after the other.
Step time (batch 32, 192 px, measured 2026-11-27 with a second engineer's jobs on the host,
load 1.7-3.7): the model and its input are channels-last (one thread: 5.3 s a step NCHW ->
3.0-3.3 s; conv backward 3.0 s -> 1.2 s), the records and weights are read by TensorFlow in a
child process (TF in this process cost 5-10% of a step at one thread), validation runs under
inference_mode. Augmentation is about 1% of a step and timm's SAME padding (5 stride-2
convolutions) under a tenth, so both are kept. With two threads a busy second core makes the
step several times slower and noisy (2-13 s): time the peer only on an idle host.
`--tiny`: a smoke test (synthetic 32 px data and random weights); its figures mean nothing.
`--check`: only the weights' copy and its comparison with the reference outputs.
`--profile`: only the training step on random input, timed, and torch.profiler's table of one
(idle host, 2026-11-28, 2 threads: 2.32 s a step, the forward pass 0.35 s; convolutions'
backward 39% of its CPU time, batch norms' backward 13%, the forward convolutions 13%, ReLU6's
backward 8%: PyTorch's own CPU kernels, not the script's data or TensorFlow).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

STARTED = time.monotonic()

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "flowers5"
WEIGHTS = REPO.parent / "shared" / "weights" / "efficientnet_lite0_imagenet"
REFERENCE = REPO.parent / "shared" / "weights" / "efficientnet_lite0_reference.npz"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return float(text[:-1]) * units[text[-1]]


def read_split(root: Path, split: str, size: int):
    """(uint8 [N, size, size, 3], int64 labels) of a labelled split, through Corolla's reader
    (labels renumbered 0..K-1 in the order of the classes present)."""
    import numpy as np

    from corolla.data import datasets, pipeline

    part = datasets.open_data(str(root), size).split(split)
    images = np.concatenate([b.numpy() for b in pipeline.eval_dataset(part, size, 64,
                                                                      pad=False)])
    return images, np.asarray(pipeline.metadata(part)["labels"])


def keras_layers(weights: Path):
    """The preset backbone's convolution and batch-norm weights, in the order they compute."""
    import keras
    import keras_hub

    backbone = keras_hub.models.Backbone.from_preset(str(weights))
    found = []
    for layer in backbone._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.DepthwiseConv2D):
            found.append(("depthwise", [w.numpy() for w in layer.weights]))
        elif isinstance(layer, keras.layers.Conv2D):
            found.append(("conv", [w.numpy() for w in layer.weights]))
        elif isinstance(layer, keras.layers.BatchNormalization):
            found.append(("bn", [w.numpy() for w in layer.weights]))
    return found


def dump(args, out: Path) -> None:
    """`--dump`: in a process of its own (TensorFlow and Keras are imported here and only here),
    the train and val splits as uint8 arrays and the preset's weights, into the .npz `out`."""
    import numpy as np

    arrays = {}
    if not args.check:
        for split in ("train", "val"):
            arrays[f"{split}_x"], arrays[f"{split}_y"] = read_split(args.data, split, args.size)
    found = keras_layers(args.weights)
    arrays["kinds"] = np.array([kind for kind, _ in found])
    for i, (_, weights) in enumerate(found):
        for j, w in enumerate(weights):
            arrays[f"w{i}_{j}"] = w
    np.savez(out, **arrays)


def read_in_subprocess(args) -> tuple[dict, list]:
    """`dump` run in a child process: TensorFlow's thread pools (and its oneDNN) never share
    this process with PyTorch's. Returns (the arrays, the weights as `keras_layers` gives them)."""
    import subprocess
    import tempfile

    import numpy as np

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "read.npz"
        command = [sys.executable, __file__, "--dump", str(out), "--data", str(args.data),
                   "--weights", str(args.weights), "--size", str(args.size)]
        subprocess.run(command + (["--check"] if args.check else []), check=True)
        with np.load(out) as stored:
            arrays = {key: stored[key] for key in stored.files}
    found, i = [], 0
    for i, kind in enumerate(arrays["kinds"]):
        weights, j = [], 0
        while f"w{i}_{j}" in arrays:
            weights.append(arrays[f"w{i}_{j}"])
            j += 1
        found.append((str(kind), weights))
    return arrays, found


def copy_weights(model, found) -> int:
    """Copies `found` (keras_layers) into the timm model's convolutions and batch norms, in
    order; returns how many modules were copied. A count or shape that differs is an error."""
    import numpy as np
    import torch

    modules = [m for name, m in model.named_modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.BatchNorm2d))
               and not name.startswith("classifier")]
    if len(modules) != len(found):
        raise SystemExit(f"timm has {len(modules)} convolutions and batch norms, the preset "
                         f"{len(found)}: not the same architecture")
    with torch.no_grad():
        for module, (kind, arrays) in zip(modules, found):
            if isinstance(module, torch.nn.BatchNorm2d):
                gamma, beta, mean, var = arrays
                for target, value in ((module.weight, gamma), (module.bias, beta),
                                      (module.running_mean, mean), (module.running_var, var)):
                    target.copy_(torch.from_numpy(np.asarray(value)))
                continue
            kernel = arrays[0]
            # Keras: [kh, kw, in, out] (depthwise: [kh, kw, channels, 1]); PyTorch: [out, in, kh,
            # kw] (depthwise: [channels, 1, kh, kw]).
            kernel = kernel.transpose(2, 3, 0, 1) if kind == "depthwise" else \
                kernel.transpose(3, 2, 0, 1)
            if tuple(kernel.shape) != tuple(module.weight.shape):
                raise SystemExit(f"shape {kernel.shape} of the preset against "
                                 f"{tuple(module.weight.shape)} in timm")
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel)))
            if len(arrays) > 1 and module.bias is not None:
                module.bias.copy_(torch.from_numpy(arrays[1]))
    return len(modules)


def to_input(images):
    """uint8 NHWC (numpy or a tensor) -> float (x - 127) / 128, as the weights were trained:
    NCHW in shape, channels-last in memory (as the model is kept: oneDNN's convolutions, the
    depthwise ones above all, are several times faster so than in NCHW on a CPU)."""
    import torch

    images = torch.as_tensor(images)
    return ((images.permute(0, 3, 1, 2).float() - 127.0) / 128.0).contiguous(
        memory_format=torch.channels_last)


def check_copy(model) -> float:
    """The largest difference of the copied backbone's pooled features from the reference."""
    import numpy as np
    import torch

    reference = np.load(REFERENCE)
    model.eval()
    with torch.inference_mode():
        pooled = model.forward_head(model.forward_features(to_input(reference["images"])),
                                    pre_logits=True).numpy()
    return float(np.abs(pooled - reference["features_same"]).max())


def profile(args) -> None:
    """The training step alone (`--batch` random images at `--size` px, channels-last, AdamW),
    after two to warm up: its seconds over three, the forward pass in inference mode, and
    torch.profiler's table of one step by the operators' own CPU time."""
    import timm
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as profiled

    torch.set_num_threads(os.cpu_count() or 1)
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=5)
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images = to_input(torch.randint(0, 256, (args.batch, args.size, args.size, 3),
                                    dtype=torch.uint8))
    labels = torch.randint(0, 5, (args.batch,))
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    step(), step()
    began = time.perf_counter()
    for _ in range(3):
        step()
    each = (time.perf_counter() - began) / 3
    model.eval()
    with torch.inference_mode():
        began = time.perf_counter()
        model(images)
        forward = time.perf_counter() - began
    model.train()
    with profiled(activities=[ProfilerActivity.CPU]) as prof:
        step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    print(f"a training step of {args.batch} images at {args.size} px: {each:.2f} s "
          f"({torch.get_num_threads()} threads); the forward pass in inference mode "
          f"{forward:.2f} s; {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time", default="6m")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--size", type=int, default=192)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--weights", type=Path, default=WEIGHTS)
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--check", action="store_true",
                        help="only copy the weights and compare with the reference outputs")
    parser.add_argument("--profile", action="store_true",
                        help="only time training steps on random input, and where one goes")
    parser.add_argument("--dump", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.dump:
        return dump(args, args.dump)
    if args.profile:
        return profile(args)
    import numpy as np
    import timm
    import torch
    from sklearn.metrics import f1_score
    from torchvision.transforms import v2

    torch.set_num_threads(os.cpu_count() or 1)
    if args.check:
        model = timm.create_model("tf_efficientnet_lite0", pretrained=False, num_classes=5)
        copied = copy_weights(model, read_in_subprocess(args)[1])
        print(f"copied {copied} convolutions and batch norms; pooled features of the reference "
              f"photos differ from features_same by at most {check_copy(model):.2e}")
        return
    budget = seconds(args.time)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    if args.tiny:
        rng = np.random.default_rng(0)
        size = 32
        train_x = rng.integers(0, 255, (48, size, size, 3), dtype=np.uint8)
        train_y = rng.integers(0, 5, 48)
        val_x, val_y = train_x[:16], train_y[:16]
    else:
        size = args.size
        arrays, found = read_in_subprocess(args)
        train_x, train_y = arrays["train_x"], arrays["train_y"]
        val_x, val_y = arrays["val_x"], arrays["val_y"]
    classes = np.unique(np.concatenate([train_y, val_y]))
    index = {c: i for i, c in enumerate(classes)}
    train_y = np.array([index[c] for c in train_y])
    val_y = np.array([index[c] for c in val_y])
    model = timm.create_model("tf_efficientnet_lite0", pretrained=False,
                              num_classes=len(classes))
    if not args.tiny:
        copied = copy_weights(model, found)
        print(f"copied {copied} convolutions and batch norms; pooled features of the reference "
              f"photos differ from features_same by at most {check_copy(model):.2e}", flush=True)
    model = model.to(memory_format=torch.channels_last)

    augment = v2.Compose([v2.RandomResizedCrop(size, scale=(0.35, 1.0), antialias=True),
                          v2.RandomHorizontalFlip()])
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    steps = math.ceil(len(train_x) / args.batch)

    def rate(step: int, epochs: int) -> float:
        """Linear warm-up over the first epoch, then a cosine to zero over `epochs`."""
        if step < steps:
            return args.lr * (step + 1) / steps
        done = (step - steps) / max((epochs - 1) * steps, 1)
        return args.lr * 0.5 * (1 + math.cos(math.pi * min(done, 1.0)))

    def train_epoch(epoch: int, epochs: int) -> float:
        model.train()
        order = np.random.permutation(len(train_x))
        total = 0.0
        for i in range(steps):
            batch = order[i * args.batch:(i + 1) * args.batch]
            # Per image, on uint8 tensors: about 1% of a step (a DataLoader's workers would
            # only take cores from the model's threads).
            images = torch.stack([augment(image) for image in
                                  torch.from_numpy(train_x[batch]).permute(0, 3, 1, 2)])
            for group in optimizer.param_groups:
                group["lr"] = rate(epoch * steps + i, epochs)
            loss = loss_fn(model(to_input(images.permute(0, 2, 3, 1))),
                           torch.from_numpy(train_y[batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        return total / steps

    def validate() -> float:
        model.eval()
        predicted = []
        with torch.inference_mode():
            for i in range(0, len(val_x), 64):
                predicted.append(model(to_input(val_x[i:i + 64])).argmax(1).numpy())
        return float(f1_score(val_y, np.concatenate(predicted), average="macro"))

    def elapsed() -> float:
        return time.monotonic() - STARTED

    print(f"peer: tf_efficientnet_lite0 at {size} px, {len(train_x)} train / {len(val_x)} val "
          f"images, {len(classes)} classes, batch {args.batch}, AdamW {args.lr:g}; budget "
          f"{budget:.0f} s, {elapsed():.0f} s spent before training; {load()}", flush=True)
    epochs, best, epoch, each = 1, 0.0, 0, 0.0
    while epoch < epochs:
        began = time.monotonic()
        loss = train_epoch(epoch, epochs)
        score = validate()
        each = time.monotonic() - began
        best = max(best, score)
        epoch += 1
        if epoch == 1:  # the plan: the epochs whose measured seconds fit in 95% of what is left
            epochs = 1 + max(int(0.95 * (budget - elapsed()) // each), 0)
        print(f"epoch {epoch}/{epochs}: {each:.0f} s, loss {loss:.4f}, val macro F1 "
              f"{score:.4f}; {load()}", flush=True)
        if elapsed() + each > budget:
            break
    print(f"peer best val macro F1 {best:.4f} after {epoch} epochs, {elapsed():.0f} s of "
          f"{budget:.0f} ({elapsed() / budget:.0%}); {load()}", flush=True)


if __name__ == "__main__":
    sys.exit(main())

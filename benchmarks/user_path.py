"""The user's path on one GPU, timed, beside what users would pick instead.

    python benchmarks/user_path.py [--data ../shared/data/flowers5]
        [--weights ../shared/weights/efficientnet_lite0_imagenet] [--backend auto]
        [--epochs 1] [--steps-per-epoch 20] [--size 224] [--batch 256] [--steps 40]
        [--json FILE] [--part all|path|throughput] [--tiny]

1. The commands as a user types them, each in a fresh process: `corolla train --data D
   --recipe auto --weights W` (shortened by --epochs and --steps-per-epoch), `evaluate`,
   `predict` on a few photos, `export --format onnx`; seconds each.
2. The compile cache at work: `evaluate` again in a new process (JAX loads the programs the
   first one compiled): its seconds beside the first, and with the JAX backend, for each of the
   two, the XLA programs it needed and how many the cache gave it (JAX's own monitoring
   events, counted by tests/helpers/cache_events.py; the cache's files say nothing of hits: on
   a GPU most of them are autotuning results).
3. Training throughput of EfficientNet-B0 at --size and --batch from one in-memory batch, at the
   plan's precision: Corolla (`model.fit` on uint8 images, as `corolla train` runs it, on the
   chosen backend with the plan's XLA setting), and beside it timm's `efficientnet_b0` on
   PyTorch, eager and with `torch.compile`, at the same batch and precision (its batch made
   on the GPU), when torch and timm are importable.
4. Where Corolla's step time goes, each part timed alone in the same process as row 3: `fit` on
   a batch already on the device (the compute alone; JAX), the host-to-device copy of one batch
   (JAX), Corolla's input pipeline with no model (`--data`'s train split, decoded and augmented
   at --size) and `fit` through that pipeline. The slowest of them bounds the pipeline row.
5. The first step again in a second process with the compile cache the first one filled.

Everything runs under a fresh COROLLA_CACHE_DIR, so the first process compiles cold. Each
command's seconds are printed as it ends and --json is rewritten after each, so a run cut short
keeps what it measured. One table at the end with each row's ratio to Corolla's, the device,
the versions and the date, then `USER_PATH {json}`. `--part path` or `--part throughput` runs
one half (a device lent in calls of limited length runs them as two calls).

`--tiny` is the CPU smoke test (tests/end_to_end/test_benchmark_user_path.py): synthetic 32 px
petals, small_cnn at 32 px, one epoch of 2 steps, throughput at batch 8 over 3 steps.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelerator_check import NUM_CLASSES, in_memory, train_split  # this folder's


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/data/flowers5")
    p.add_argument("--weights", default="../shared/weights/efficientnet_lite0_imagenet")
    p.add_argument("--backend", default="auto", choices=("auto", "tensorflow", "jax"))
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--model", default="efficientnet_b0", help="the throughput rows' model")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=40, help="timed training steps")
    p.add_argument("--json", default="")
    p.add_argument("--part", default="all", choices=("all", "path", "throughput"))
    p.add_argument("--tiny", action="store_true")
    p.add_argument("--_child", choices=("corolla", "timm"), help=argparse.SUPPRESS)
    p.add_argument("--precision", default="", help=argparse.SUPPRESS)  # timm's, from Corolla's
    p.add_argument("--first-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--pipeline-data", default="", help=argparse.SUPPRESS)  # the child's --data
    args = p.parse_args(argv)
    if args.tiny:
        args.model, args.size, args.batch, args.steps = "small_cnn", 32, 8, 3
        args.epochs, args.steps_per_epoch = 1, 2
    return args


EVENTS = Path(__file__).resolve().parents[1] / "tests" / "helpers" / "cache_events.py"


def corolla(args_list, env, cwd, counted: bool = False) -> dict:
    """`corolla ARGS` in a new process, timed; `counted`: through EVENTS, with the XLA programs
    it needed and the compile cache's hits among them (`cache_events`)."""
    start = time.perf_counter()
    runner = [str(EVENTS)] if counted else ["-m", "corolla"]
    out = subprocess.run([sys.executable, *runner, *map(str, args_list)], env=env,
                         cwd=cwd, capture_output=True, text=True, timeout=1800)
    seconds = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"corolla {' '.join(map(str, args_list))} failed:\n"
                         f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    print(f"corolla {args_list[0]}: {seconds:.1f} s", flush=True)
    row = {"seconds": round(seconds, 1), "stdout": out.stdout + out.stderr}
    if counted:
        line = [s for s in out.stdout.splitlines() if s.startswith("CACHE_EVENTS ")][-1]
        row["cache_events"] = json.loads(line[len("CACHE_EVENTS "):])
    return row


def tiny_petals(work: Path) -> Path:
    """The demo's tiny synthetic petals (32 px records), written once under `work`."""
    from corolla.data.synthetic import dataset as synthetic
    from corolla.flows import demo

    folder = work / "petals"
    return folder if folder.exists() else Path(synthetic.write(folder, demo.TINY.data))


def photos(folder: Path, size: int, n: int = 4) -> Path:
    import numpy as np
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(
            folder / f"photo{i}.jpg")
    return folder


def user_path(args, work: Path, env: dict, report: dict, save) -> None:
    """Section 1 and 2: the commands, timed, each added to `report` (and saved) as it ends."""
    runtime = ["--backend", args.backend]
    short = ["--epochs", args.epochs, "--steps-per-epoch", args.steps_per_epoch]
    if args.tiny:
        args.pipeline_data = data = tiny_petals(work)
        train = ["--data", data, "--model", "small_cnn", "--input-size", 32, "--batch-size", 8]
    else:
        data = Path(args.data).resolve()
        train = ["--data", data, "--recipe", "auto", "--weights", Path(args.weights).resolve()]
    run = work / "runs" / "path"
    rows = report["commands"] = {}

    def step(name, command, counted=False):
        rows[name] = corolla(command, env, work, counted)
        save()
        return rows[name].pop("stdout")

    # JAX's events count nothing where "auto" picks TensorFlow: no programs, nothing shown.
    counted = args.backend != "tensorflow" and importlib.util.find_spec("jax") is not None
    said = step("train", ["train", *train, *short, *runtime, "--runs-dir", work / "runs",
                          "--name", "path"], counted)
    report["recipe_auto"] = next((line for line in said.splitlines()
                                  if line.startswith("recipe auto on")), "")
    metrics = run / "metrics.json"
    if metrics.exists():
        report["train_metrics"] = {k: v for k, v in json.loads(metrics.read_text()).items()
                                   if k in ("f1_macro", "accuracy")}
    step("evaluate", ["evaluate", run, *runtime], counted)
    step("evaluate again", ["evaluate", run, *runtime], counted)
    step("predict photos", ["predict", run, photos(work / "photos", 64), *runtime,
                            "--out", work / "photos.csv"])
    step("export onnx", ["export", run, "--format", "onnx"])


def corolla_throughput(args) -> dict:
    """Corolla's training step as `corolla train` runs it: `model.fit` on uint8 images (what
    its pipeline yields; the model casts and rescales them on the device), here one in-memory
    batch repeated (accelerator_check's); the median of 3 fits of --steps steps. Not
    `train_on_batch` on float32 arrays: that copies 4x the bytes to the device and waits for
    every step (on an H200, 4,220 images/s where `fit` ran 8,026-8,171)."""
    from corolla import models, runtime

    plan = runtime.detect(backend=args.backend)
    import keras

    with plan.scope():
        model = models.create_model(args.model, NUM_CLASSES, args.size)
        model.compile(optimizer="adam", loss="categorical_crossentropy",
                      jit_compile=plan.jit_compile)
    data = in_memory(args.size, args.batch, seed=0)
    start = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=1, verbose=0)
    first = time.perf_counter() - start
    name = f"Corolla ({keras.backend.backend()}, {plan.precision})"
    row = {"name": name, "first_step_seconds": round(first, 1), "precision": plan.precision,
           "device": plan.hardware.device_name or plan.accelerator}
    if args.first_only:  # the compile cache's row: a second process's first step
        return [{**row, "name": f"{name}, a second process", "images_per_second": 0.0}]
    row["images_per_second"] = fit_rate(model, lambda: data, args)
    return [row, *explained(args, model, data)]


def fit_rate(model, data, args) -> float:
    """images/s of `model.fit` on `data()`: the median of 3 epochs of --steps steps after one
    that warms it, in one `fit`, so the input's iterator is made once, as in a run."""
    import keras

    ends = []
    timer = keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: ends.append(time.perf_counter()),
        on_epoch_end=lambda epoch, logs: ends.append(time.perf_counter()))
    model.fit(data(), epochs=4, steps_per_epoch=args.steps, verbose=0, callbacks=[timer])
    rates = [args.batch * args.steps / (ends[i + 1] - ends[i]) for i in range(2, 8, 2)]
    return round(statistics.median(rates), 1)


def explained(args, model, data) -> list[dict]:
    """Section 4: the parts of a step through the pipeline, each alone (see the docstring)."""
    import keras
    import numpy as np

    from corolla.data import pipeline

    rows = []
    images, labels = next(iter(data.take(1).as_numpy_iterator()))
    if keras.backend.backend() == "jax":
        import jax

        on_device = (jax.device_put(images), jax.device_put(labels))

        def again():  # a generator: Keras takes no other iterator
            while True:
                yield on_device

        rows.append({"name": "  fit, batch already on the device",
                     "images_per_second": fit_rate(model, again, args)})
        host = np.ascontiguousarray(images)
        jax.device_put(host).block_until_ready()
        seconds = []
        for _ in range(10):
            start = time.perf_counter()
            jax.device_put(host).block_until_ready()
            seconds.append(time.perf_counter() - start)
        rows.append({"name": "  host-to-device copy alone",
                     "images_per_second": round(args.batch / statistics.median(seconds), 1),
                     "megabytes": round(host.nbytes / 1e6, 1)})
    split = train_split(args.pipeline_data, args.size)

    def stream():
        return pipeline.train_dataset(split, args.size, args.batch,
                                      epoch_examples=args.batch * args.steps, seed=0,
                                      num_classes=NUM_CLASSES)

    batches = stream().as_numpy_iterator()
    next(batches)  # the first batch opens the files and fills the shuffle buffer
    start = time.perf_counter()
    for _ in range(args.steps - 1):
        next(batches)
    rows.append({"name": "  pipeline alone, no model",
                 "images_per_second": round(args.batch * (args.steps - 1) /
                                            (time.perf_counter() - start), 1)})
    rows.append({"name": "  fit through the pipeline",
                 "images_per_second": fit_rate(model, stream, args)})
    return rows


def timm_throughput(args, precision: str) -> list[dict]:
    """timm's efficientnet_b0 on PyTorch at the same batch and precision, eager and compiled;
    nothing when torch or timm is missing."""
    try:
        import timm
        import torch
    except ImportError:
        return []
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = {"mixed_bfloat16": torch.bfloat16, "mixed_float16": torch.float16}.get(precision)
    rows = []
    for compiled in (False, True):
        model = timm.create_model(args.model if args.model.startswith("efficientnet") else
                                  "efficientnet_b0", num_classes=NUM_CLASSES).to(device)
        model = model.to(memory_format=torch.channels_last)
        optimizer = torch.optim.Adam(model.parameters())
        step_model = torch.compile(model) if compiled else model
        x = torch.rand(args.batch, 3, args.size, args.size, device=device)
        x = x.to(memory_format=torch.channels_last)
        y = torch.arange(args.batch, device=device) % NUM_CLASSES

        def step():
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device, dtype=dtype, enabled=dtype is not None):
                loss = torch.nn.functional.cross_entropy(step_model(x), y)
            loss.backward()
            optimizer.step()

        start = time.perf_counter()
        step()
        first = time.perf_counter() - start
        step()
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(args.steps):
            step()
        if device == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        rows.append({"name": f"PyTorch + timm {'torch.compile' if compiled else 'eager'}",
                     "images_per_second": round(args.batch * args.steps / seconds, 1),
                     "first_step_seconds": round(first, 1)})
    return rows


def child(args) -> None:
    """One throughput child: Corolla's row, or (`--_child timm`) timm's at a given precision,
    each in its own process so that neither framework holds the other's GPU memory."""
    rows = (timm_throughput(args, args.precision) if args._child == "timm"
            else corolla_throughput(args))
    print("ROWS " + json.dumps(rows), flush=True)


def throughput_child(args, env, which: str, precision: str = "", *extra) -> list[dict]:
    out = subprocess.run([sys.executable, __file__, "--_child", which, "--precision", precision,
                          "--backend", args.backend, "--model", args.model, "--size",
                          str(args.size), "--batch", str(args.batch), "--steps", str(args.steps),
                          "--pipeline-data", str(args.pipeline_data), *extra],
                         env=env, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise SystemExit(f"throughput child ({which}) failed:\n{out.stderr[-3000:]}")
    line = [s for s in out.stdout.splitlines() if s.startswith("ROWS ")][-1]
    rows = json.loads(line[len("ROWS "):])
    for row in rows:
        print(f"{row['name']}: {row['images_per_second']} images/s", flush=True)
    return rows


def versions() -> dict:
    found = {}
    for name in ("corolla", "keras", "jax", "jaxlib", "tensorflow", "tensorflow-cpu", "keras-hub",
                 "torch", "timm"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._child:
        child(args)
        return 0
    report = {"args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
              "date": datetime.date.today().isoformat(), "versions": versions()}

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=1))

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "COROLLA_CACHE_DIR": str(work / "cache")}
        if args.part in ("all", "path"):
            user_path(args, work, env, report, save)
        if args.part in ("all", "throughput"):
            args.pipeline_data = tiny_petals(work) if args.tiny else Path(args.data).resolve()
            rows = report["throughput"] = throughput_child(args, env, "corolla")
            save()
            rows += throughput_child(args, env, "corolla", "", "--first-only")
            save()
            rows += throughput_child(args, env, "timm", rows[0]["precision"])
            save()
    print_table(report)
    print("USER_PATH " + json.dumps(report), flush=True)
    return 0


def print_table(report: dict) -> None:
    """The figures of one report, or of a path report and a throughput report merged."""
    print(f"{report['date']}; " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    if report.get("recipe_auto"):
        print(report["recipe_auto"])
    commands = report.get("commands", {})
    if commands:
        print(f"{'command':24s} {'seconds':>8s}")
        for name, row in commands.items():
            print(f"{name:24s} {row['seconds']:8.1f}")
    if report.get("train_metrics"):
        print("the trained run's val: " + ", ".join(
            f"{k} {v:.4f}" for k, v in report["train_metrics"].items()))
    for name, row in commands.items():
        events = row.get("cache_events", {})
        if events.get("slowest"):
            print(f"{name}: {events['programs']} XLA programs, {events['hits']} from the cache, "
                  f"{events['seconds']:.1f} s compiling or loading; longest: " + ", ".join(
                      f"{fun} {seconds:.1f} s" for fun, seconds in events["slowest"]))
    if "evaluate again" in commands:
        first, again = commands["evaluate"], commands["evaluate again"]
        events = ", ".join(f"{label} {row['cache_events']['hits']} of "
                           f"{row['cache_events']['programs']} programs from the cache"
                           for label, row in (("first", first), ("again", again))
                           if row.get("cache_events", {}).get("programs"))
        print(f"compile cache: evaluate {first['seconds']:.1f} s, again in a new process "
              f"{again['seconds']:.1f} s (x{first['seconds'] / max(again['seconds'], 0.1):.2f})"
              + (f"; {events}" if events else ""))
    rows = report.get("throughput")
    if rows:
        base = rows[0]["images_per_second"]
        a = report["args"]
        print(f"{a['model']} {a['size']} px, batch {a['batch']}, {rows[0]['precision']}, "
              f"on {rows[0]['device']}:")
        print(f"{'train step':40s} {'images/s':>10s} {'ratio':>6s} {'first step s':>13s}")
        for row in rows:
            first = row.get("first_step_seconds")
            rate = row["images_per_second"]
            print(f"{row['name']:40s} " + (f"{rate:10.1f} {rate / base:6.2f}" if rate else
                                            f"{'':10s} {'':6s}") +
                  (f" {first:13.1f}" if first is not None else ""))


if __name__ == "__main__":
    sys.exit(main())

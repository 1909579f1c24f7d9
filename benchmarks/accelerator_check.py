"""The check-list for a first real accelerator, its figures side by side in one run.

What Corolla detects and plans there, and the figures that say whether training on it works as
it should.

Why: the CPU is where Corolla is developed and tested; a GPU or TPU is where it will be paid
for. Before a real run on a new machine, this says in a few minutes whether the plan is the
expected one, whether the step is compiled once per input size (and never per epoch), how fast
`efficientnet_b0` trains at 224 px next to a published figure, what a checkpoint costs, whether
feeding uint8 to `predict` pays, and whether `--deterministic` repeats bit for bit.

    python benchmarks/accelerator_check.py [--backend auto|tensorflow|jax]
        [--precision auto|float32|mixed_float16|mixed_bfloat16] [--model efficientnet_b0]
        [--size 224] [--batch 64] [--steps 20] [--rounds 3] [--also 256,64:mixed_bfloat16]
        [--sections train,checkpoint,predict,determinism] [--parallel-determinism]
        [--data DIR] [--json FILE] [--strict] [--tiny]

`--tiny` is the CPU smoke test (CI runs it: tests/end_to_end/test_benchmark_accelerator_check.py):
small_cnn at 32 px, batch 8, a few steps; it finishes in well under a minute on a 2-core CPU.

Sections, in the order they run (one process; the determinism runs in child processes, since
its switches are process-wide and would slow every other figure):

1. detection: `corolla.runtime.detect` (before Keras is imported), the plan and the versions.
2. compiles: one model built as progressive resizing builds it (`create_model(any_size=True)`)
   trains 2 epochs at a smaller size, then 1 + `--rounds` epochs at `--size` on one in-memory
   batch, then 1 + `--rounds` epochs at `--size` through Corolla's own input pipeline. Counted:
   traces of the train step (a counter in a wrapper around `model.train_step`: a jitted JAX
   function or a `tf.function` calls the Python step once per trace), and on JAX also the XLA
   compilations JAX reports (`jax.monitoring`'s backend-compile events, by function name). On
   TensorFlow only traces are counted: with `jit_compile` XLA compiles each concrete shape
   behind a trace, which this does not see. Expected: 1 per size, 0 in every later epoch, 0
   when the pipeline's batches replace the in-memory ones (same shape and dtype).
3. train: images/s at `--size` (median of `--rounds` epochs of `--steps` steps after a warm-up
   epoch; min..max beside it), from one in-memory batch (the accelerator alone) and from
   Corolla's pipeline over synthetic JPEG TFRecords (or `--data`): decode + augment on the
   host. Beside them the anchor: NVIDIA's TensorFlow 2 EfficientNet-B0 with AMP (and XLA) on
   one A100, 3,454 images/s (its own data pipeline, batch size as NVIDIA ran it). `--also`
   adds in-memory rows for other batch sizes or precisions (each a fresh fixed-size model:
   one more compile).
4. checkpoint: seconds (median of `--rounds`) and bytes of `model.save` (.keras, with the
   optimizer: what a run's model.keras holds), of the per-epoch backup
   (`training.backup.save_backup`: .npz) and its loading, and of Keras' `save_weights`
   (.weights.h5: the format of earlier versions' backups) and `load_weights` beside them.
5. predict: images/s of `model.predict` on the model at its fixed size, fed the same images as
   uint8 and as float32 arrays (median of `--rounds` passes over `--predict-batches` batches);
   the model casts to float on the device, so uint8 moves a quarter of the bytes.
6. determinism: two identical seeded trainings of `--det-steps` steps through the ordered
   pipeline, each on a new model, with the switches Corolla's `--deterministic` sets
   (`corolla.training.preparing.set_determinism`: `keras.utils.set_random_seed`, and on
   TensorFlow `enable_op_determinism`); on a JAX GPU a second pair adds XLA_FLAGS
   `--xla_gpu_deterministic_ops=true`, which Corolla does not set. Bit-identical weights or not,
   and the largest difference.

Last comes a compact table, then one line `ACCEL_CHECK {json}` with every figure. Exit status 0
when it ran through; with `--strict`, 1 when a check (compiles, bit-identical under Corolla's
switches) did not come out as expected.

Seen on one NVIDIA H100 80GB (JAX 0.11.2, Keras 3.15.1, tensorflow-cpu 2.21.0 for tf.data;
`--backend jax --also 256`, then `--sections determinism --parallel-determinism`): the plan
jax / mixed_float16 / XLA; one XLA compile of the step per size (118-132 s each), none per
epoch or for the pipeline; 1,829 images/s at batch 64 in memory, 1,811 through the pipeline
(x0.53 the anchor), 6,457 at batch 256 (x1.87); model.save 1.07 s / 84 MB, save_weights
0.75 s / 84 MB; predict 5,585 images/s from uint8, 7,022 from float32 (x0.80); the repeat
under Corolla's switches differed (1 of 314 tensors, by 2.4e-7), with
`--xla_gpu_deterministic_ops=true` it was bit-identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ANCHOR = 3454  # images/s: NVIDIA DeepLearningExamples, TF2 EfficientNet-B0, AMP, 1x A100
ANCHOR_TEXT = "NVIDIA TF2 EfficientNet-B0 AMP, 1x A100"
NUM_CLASSES = 104  # the competition's head
SECTIONS = ("train", "checkpoint", "predict", "determinism")  # train: compiles + throughput
TINY = {"model": "small_cnn", "size": 32, "batch": 8, "steps": 3, "rounds": 2,
        "predict_batches": 4, "det_steps": 2, "compile_steps": 2}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="auto", choices=("auto", "tensorflow", "jax"))
    p.add_argument("--precision", default="auto",
                   choices=("auto", "float32", "mixed_float16", "mixed_bfloat16"))
    p.add_argument("--model", default="efficientnet_b0")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--small-size", type=int, default=0,
                   help="the other size of the compile check (default: 3/4 of --size)")
    p.add_argument("--batch", type=int, default=64, help="per replica")
    p.add_argument("--steps", type=int, default=20, help="steps per timed epoch")
    p.add_argument("--rounds", type=int, default=3, help="timed epochs / repeats (median)")
    p.add_argument("--compile-steps", type=int, default=3,
                   help="steps per epoch at the smaller size")
    p.add_argument("--predict-batches", type=int, default=20)
    p.add_argument("--det-steps", type=int, default=5, help="steps of each determinism run")
    p.add_argument("--also", default="",
                   help="extra in-memory training rows: BATCH[:PRECISION],... e.g. "
                        "256,64:mixed_bfloat16")
    p.add_argument("--data", default="",
                   help="a data folder in the competition layout (default: synthetic petals)")
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"which of {','.join(SECTIONS)} to run (detection always runs)")
    p.add_argument("--parallel-determinism", action="store_true",
                   help="run section 6's child processes at once (on a GPU: two pairs of "
                        "compiles overlap)")
    p.add_argument("--json", default="", help="also write the figures to this file")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when a check is not as expected")
    p.add_argument("--tiny", action="store_true",
                   help="CPU smoke test: " + ", ".join(f"{k} {v}" for k, v in TINY.items()))
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--_child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.tiny:
        for key, value in TINY.items():
            setattr(args, key, value)
    args.sections = [x.strip() for x in args.sections.split(",") if x.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        p.error(f"unknown sections {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    if not args.small_size:
        args.small_size = max(8, args.size * 3 // 4 // 8 * 8)
    return args


# --- counting ----------------------------------------------------------------------------------

class Counter:
    """Traces of a step function (each jit / tf.function trace calls the Python step once), the
    input signatures they were traced for, and, on JAX, the XLA compilations JAX reports, by
    function name. A signature seen before is not a new program: TensorFlow traces a fresh
    `tf.function` twice on its first call (once more after the first trace made variables)."""

    def __init__(self):
        self.traces = {"train_step": 0, "predict_step": 0}
        self.signatures: dict[str, list] = {"train_step": [], "predict_step": []}
        self.xla: list[tuple[str, float]] = []  # (function name, seconds)

    def wrap(self, model) -> None:
        """Counts `model`'s traces; a new signature list per model (a new model is a new
        program)."""
        train, predict = model.train_step, model.predict_step
        for step in self.signatures:
            self.signatures[step] = []

        def count(step, args):
            self.traces[step] += 1
            sig = signature(args[-1])
            if sig not in self.signatures[step]:
                self.signatures[step].append(sig)

        def train_step(*args):
            count("train_step", args)
            return train(*args)

        def predict_step(*args):
            count("predict_step", args)
            return predict(*args)

        model.train_step, model.predict_step = train_step, predict_step

    def listen_to_jax(self) -> bool:
        try:
            import jax.monitoring

            def on_event(event, seconds, **kwargs):
                if event == "/jax/core/compile/backend_compile_duration":
                    self.xla.append((str(kwargs.get("fun_name", "?")), float(seconds)))

            jax.monitoring.register_event_duration_secs_listener(on_event)
            return True
        except Exception:  # an older or newer JAX without this hook: traces only
            return False

    def snapshot(self) -> tuple[dict, dict, int]:
        return dict(self.traces), {k: len(v) for k, v in self.signatures.items()}, len(self.xla)

    def since(self, snap, step: str = "train_step") -> dict:
        traces, signatures, n = snap
        new = self.xla[n:]
        mine = [s for name, s in new if step in name]
        return {"traces": self.traces[step] - traces[step],
                "signatures": self.signatures[step][signatures[step]:],
                "xla": len(mine), "xla_seconds": round(sum(mine), 2), "xla_all": len(new)}


def signature(data) -> str:
    """The shapes and dtypes a step was traced for, e.g. `8x32x32x3 uint8, 8x104 float32`."""
    import keras

    parts = []
    for x in keras.tree.flatten(data):
        shape = getattr(x, "shape", None)
        if shape is not None:
            dims = "x".join("?" if d is None else str(d) for d in tuple(shape))
            parts.append(f"{dims} {getattr(getattr(x, 'dtype', None), 'name', x.dtype)}")
    return ", ".join(parts)


def epoch_recorder(keras, counter: Counter):
    class EpochRecorder(keras.callbacks.Callback):
        """Per epoch: wall seconds (begin to end; the end waits for the epoch's metrics, so
        for all its steps) and what was traced and compiled during it."""

        def __init__(self):
            super().__init__()
            self.seconds, self.counts = [], []

        def on_epoch_begin(self, epoch, logs=None):
            self.snap = counter.snapshot()
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            {k: float(v) for k, v in (logs or {}).items()}  # results on the host: steps done
            self.seconds.append(time.perf_counter() - self.start)
            self.counts.append(counter.since(self.snap))

    return EpochRecorder()


# --- sections ----------------------------------------------------------------------------------

def versions() -> dict:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name, dist in (("keras", "keras"), ("tensorflow", None), ("jax", "jax"),
                       ("jaxlib", "jaxlib"), ("numpy", "numpy")):
        try:
            if dist is None:  # tensorflow, tensorflow-cpu or tf-nightly: ask the module
                import tensorflow as tf

                out[name] = tf.__version__
            else:
                out[name] = md.version(dist)
        except Exception:
            pass
    return out


def device_name(plan) -> str:
    if plan.backend == "jax":
        import jax

        devices = jax.devices()
        return f"{len(devices)}x {devices[0].device_kind} ({devices[0].platform})"
    if plan.accelerator == "gpu":
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        details = tf.config.experimental.get_device_details(gpus[0]) if gpus else {}
        return f"{len(gpus)}x {details.get('device_name', 'GPU')}"
    if plan.accelerator == "tpu":
        return f"TPU ({plan.hardware.tpu}, {plan.hardware.tpu_cores} cores)"
    return f"CPU ({os.cpu_count()} cores, {platform.processor() or platform.machine()})"


def synthetic_data(folder: Path, size: int, train: int) -> Path:
    from corolla.data.synthetic import dataset as synthetic

    spec = synthetic.PetalsSpec(image_size=size, num_classes=10, train=train, val=8, test=8,
                                shards=4, seed=0)
    return synthetic.write(folder, spec)


def train_split(data: str, size: int):
    from corolla.data.layout import open_layout

    return open_layout(data, size).split("train")


def in_memory(size: int, batch: int, seed: int):
    """One batch, repeated: uint8 images (as Corolla's pipeline gives them) and one-hot labels."""
    import numpy as np
    import tensorflow as tf

    from corolla.data.synthetic import petals

    images, labels = petals.generate(batch, image_size=size, seed=seed, num_classes=10)
    onehot = np.eye(NUM_CLASSES, dtype="float32")[labels]
    return tf.data.Dataset.from_tensors((images, onehot)).repeat()


def pipeline_stream(split, size: int, plan, steps: int, seed: int, ordered: bool = False):
    from corolla.data import pipeline

    return pipeline.train_dataset(split, size, plan.global_batch,
                                  epoch_examples=steps * plan.global_batch, seed=seed,
                                  ordered=ordered, num_classes=NUM_CLASSES)


def fit(model, data, epochs: int, steps: int, recorder):
    model.fit(data, epochs=epochs, steps_per_epoch=steps, callbacks=[recorder], verbose=0,
              shuffle=False)


def throughput(seconds: list[float], steps: int, batch: int) -> dict:
    rates = [steps * batch / s for s in seconds]
    return {"images_per_second": round(statistics.median(rates), 1),
            "min": round(min(rates), 1), "max": round(max(rates), 1), "rounds": len(rates)}


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def checkpoint_figures(model, folder: Path, rounds: int) -> dict:
    from corolla.training import backup as backup_lib

    full, weights, backup = folder / "model.keras", folder / "backup.weights.h5", \
        folder / "backup.npz"
    save = timed(lambda: model.save(full), rounds)
    save_backup = timed(lambda: backup_lib.save_backup(model, backup), rounds)
    load_backup = timed(lambda: backup_lib.load_backup(model, backup), rounds)
    save_weights = timed(lambda: model.save_weights(weights), rounds)
    load_weights = timed(lambda: model.load_weights(weights), rounds)
    return {"save_seconds": round(save, 3), "save_bytes": full.stat().st_size,
            "backup_seconds": round(save_backup, 3), "backup_bytes": backup.stat().st_size,
            "load_backup_seconds": round(load_backup, 3),
            "save_weights_seconds": round(save_weights, 3),
            "save_weights_bytes": weights.stat().st_size,
            "load_weights_seconds": round(load_weights, 3)}


def predict_figures(model, counter: Counter, size: int, batch: int, batches: int, rounds: int,
                    seed: int) -> dict:
    import numpy as np

    from corolla.data.synthetic import petals

    base, _ = petals.generate(batch, image_size=size, seed=seed + 1, num_classes=10)
    x8 = np.concatenate([base] * batches)
    out = {}
    for name, x in (("uint8", x8), ("float32", x8.astype("float32"))):
        snap = counter.snapshot()
        model.predict(x[:batch], batch_size=batch, verbose=0)  # compile, warm up
        compiled = counter.since(snap, "predict_step")
        seconds = timed(lambda x=x: model.predict(x, batch_size=batch, verbose=0), rounds)
        out[name] = {"images_per_second": round(len(x) / seconds, 1), "compiles": compiled,
                     "bytes_per_image": int(x[0].nbytes)}
    out["ratio"] = round(out["uint8"]["images_per_second"] /
                         out["float32"]["images_per_second"], 2)
    return out


def parse_also(text: str, batch: int) -> list[tuple[int, str]]:
    rows = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        b, _, precision = item.partition(":")
        rows.append((int(b) if b else batch, precision))
    return rows


def run_determinism(args, data: str, plan) -> list[dict]:
    """Each variant in a child process of its own; with `--parallel-determinism` the children
    run at once, each given a share of the accelerator's memory (on a GPU their compiles, which
    run on the host, then overlap)."""
    variants = [("corolla --deterministic", {})]
    if plan.backend == "jax" and plan.accelerator == "gpu":
        flags = (os.environ.get("XLA_FLAGS", "") + " --xla_gpu_deterministic_ops=true").strip()
        variants.append(("+ --xla_gpu_deterministic_ops", {"XLA_FLAGS": flags}))
    parallel = args.parallel_determinism and len(variants) > 1
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", "determinism",
           "--backend", plan.backend, "--precision", plan.precision, "--model", args.model,
           "--size", str(args.size), "--batch", str(args.batch),
           "--det-steps", str(args.det_steps), "--seed", str(args.seed), "--data", data]
    running, results = [], []
    for label, extra_env in variants:
        env = {**os.environ, **extra_env}
        if parallel:
            env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{0.9 / len(variants):.2f}")
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        running.append((label, child, time.perf_counter()))
        if not parallel:
            results.append(_child_result(*running.pop()))
    results += [_child_result(*r) for r in running]
    return results


def _child_result(label: str, child, start: float) -> dict:
    stdout, stderr = child.communicate()
    seconds = round(time.perf_counter() - start, 1)
    line = [s for s in stdout.splitlines() if s.startswith("DETERMINISM ")]
    if child.returncode or not line:
        print(f"determinism ({label}): the child failed (exit {child.returncode})\n"
              f"{stderr[-3000:]}", flush=True)
        return {"switches": label, "error": stderr[-500:], "seconds": seconds}
    return {"switches": label, **json.loads(line[-1][len("DETERMINISM "):]), "seconds": seconds}


def determinism_child(args) -> None:
    """Two identical seeded trainings in this process; prints whether their weights match."""
    import numpy as np

    from corolla import config as config_lib
    from corolla import models, runtime

    plan = runtime.detect(backend=args.backend, precision=args.precision,
                          batch_size=args.batch)
    import keras

    from corolla.training import compile_model
    from corolla.training.preparing import set_determinism

    config = config_lib.load_config(
        overrides={"train.deterministic": True, "train.seed": args.seed})
    split = train_split(args.data, args.size)
    runs = []
    for _ in range(2):
        keras.backend.clear_session()
        set_determinism(config, plan)  # exactly what `corolla train --deterministic` sets
        with plan.scope():
            model = models.create_model(args.model, NUM_CLASSES, args.size)
            compile_model(model, plan, 1e-3, train=config.train)
        data = pipeline_stream(split, args.size, plan, args.det_steps, args.seed, ordered=True)
        model.fit(data, epochs=1, steps_per_epoch=args.det_steps, verbose=0, shuffle=False)
        runs.append([np.asarray(keras.ops.convert_to_numpy(v)) for v in model.weights])
    digests = []
    for weights in runs:
        h = hashlib.sha256()
        for w in weights:
            h.update(np.ascontiguousarray(w).tobytes())
        digests.append(h.hexdigest()[:16])
    diff = max(float(np.max(np.abs(a.astype("float64") - b.astype("float64")), initial=0.0))
               for a, b in zip(*runs, strict=True))
    differing = sum(not np.array_equal(a, b) for a, b in zip(*runs, strict=True))
    print("DETERMINISM " + json.dumps({
        "bit_identical": digests[0] == digests[1], "sha256": digests, "max_abs_diff": diff,
        "tensors_differing": differing, "tensors": len(runs[0]), "steps": args.det_steps,
        "xla_flags": os.environ.get("XLA_FLAGS", "")}), flush=True)


# --- the run -----------------------------------------------------------------------------------

def main(argv=None) -> int:
    from corolla.runtime import tflog

    args = parse_args(argv)
    with tflog.quiet_tensorflow():  # as the CLI: TensorFlow's start-up lines
        if args._child == "determinism":
            determinism_child(args)
            return 0
        return check(args)


def check(args) -> int:
    from corolla import runtime

    started = time.perf_counter()
    plan = runtime.detect(backend=args.backend, precision=args.precision,
                          batch_size=args.batch)  # before `import keras`: it picks the backend
    report: dict = {"args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
                    "sections": args.sections}
    counter = Counter()
    jax_events = plan.backend == "jax" and counter.listen_to_jax()
    report["versions"] = versions()
    report["device"] = device_name(plan)
    report["plan"] = plan.to_dict()
    p = report["plan"]
    print(f"detection   {report['device']}: backend {plan.backend}, accelerator "
          f"{plan.accelerator}, strategy {plan.strategy_name}, {plan.replicas} replica(s), "
          f"precision {plan.precision}, jit_compile {plan.jit_compile}, steps_per_execution "
          f"{plan.steps_per_execution}, global batch {plan.global_batch}", flush=True)
    print("versions    " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()))
    print(f"plan        {json.dumps({k: p[k] for k in ('hardware', 'strategy', 'devices')})}")
    print(f"run         {args.model} at {args.size} px (compile check also at "
          f"{args.small_size} px), {args.steps} steps x {args.rounds} timed epochs, "
          f"{NUM_CLASSES} classes; sections {', '.join(args.sections)}", flush=True)

    work = Path(tempfile.mkdtemp(prefix="accelerator_check-"))
    try:
        if args.data:
            data = args.data
        else:
            t = time.perf_counter()
            data = str(synthetic_data(work / "data", args.size,
                                      train=max(4 * plan.global_batch, 64)))
            print(f"data        synthetic petals TFRecords at {args.size} px "
                  f"({time.perf_counter() - t:.1f} s to write)", flush=True)
        split = train_split(data, args.size)
        report["data"] = {"path": data if args.data else "synthetic", "train": split.count}
        model = None
        if "train" in args.sections:
            model = train_section(args, plan, counter, jax_events, split, report)
        if {"checkpoint", "predict"} & set(args.sections) and model is None:
            model = build(args, plan, any_size=True)  # untrained: its optimizer not built
        if "checkpoint" in args.sections:
            checkpoint_section(args, model, work, report)
        if "predict" in args.sections:
            predict_section(args, plan, model, counter, report)
        if "determinism" in args.sections:
            report["determinism"] = run_determinism(args, data, plan)
            for d in report["determinism"]:
                if "error" not in d:
                    print(f"determinism {d['switches']}: bit-identical {d['bit_identical']} "
                          f"({d['tensors_differing']} of {d['tensors']} tensors differ, max "
                          f"|diff| {d['max_abs_diff']:.3g}, {d['steps']} steps, "
                          f"{d['seconds']} s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    report["checks"] = checks(report)
    report["seconds"] = round(time.perf_counter() - started, 1)
    print_table(report)
    print("ACCEL_CHECK " + json.dumps(report, default=str), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, default=str) + "\n")
    return 1 if args.strict and not all(report["checks"].values()) else 0


def build(args, plan, any_size: bool = False, size: int = 0, batch_plan=None):
    from corolla import models
    from corolla.training import compile_model

    with plan.scope():
        model = models.create_model(args.model, NUM_CLASSES, size or args.size,
                                    any_size=any_size)
        compile_model(model, batch_plan or plan, 1e-3)
    return model


def train_section(args, plan, counter: Counter, jax_events: bool, split, report: dict):
    """Sections 2 and 3: one any-size model through the stages; returns it trained."""
    import keras

    model = build(args, plan, any_size=True)
    counter.wrap(model)
    phases = {}
    stages = (("small", args.small_size,
               in_memory(args.small_size, plan.global_batch, args.seed), 2, args.compile_steps),
              ("memory", args.size, in_memory(args.size, plan.global_batch, args.seed),
               1 + args.rounds, args.steps),
              ("pipeline", args.size,
               pipeline_stream(split, args.size, plan, args.steps, args.seed),
               1 + args.rounds, args.steps))
    for name, size, data_stream, epochs, steps in stages:
        recorder = epoch_recorder(keras, counter)
        fit(model, data_stream, epochs, steps, recorder)
        phases[name] = {"size": size, "epochs": recorder.counts,
                        "seconds": [round(s, 3) for s in recorder.seconds],
                        **(throughput(recorder.seconds[1:], steps, plan.global_batch)
                           if name != "small" else {})}
        c = recorder.counts
        xla = (f", XLA compiles of the step {[e['xla'] for e in c]} "
               f"({sum(e['xla_seconds'] for e in c):.1f} s), all XLA compiles "
               f"{[e['xla_all'] for e in c]}") if jax_events else ""
        print(f"compiles    {name:8s} {size:4d} px: new train_step signatures per epoch "
              f"{[len(e['signatures']) for e in c]} (traces {[e['traces'] for e in c]})"
              f"{xla}" + "".join(f"; traced for [{sig}]" for e in c for sig in e["signatures"])
              + f"; first epoch {recorder.seconds[0]:.1f} s", flush=True)
    report["compiles"] = {
        n: {"size": ph["size"], "programs": [len(e["signatures"]) for e in ph["epochs"]],
            "traces": [e["traces"] for e in ph["epochs"]],
            "signatures": [sig for e in ph["epochs"] for sig in e["signatures"]],
            "xla": [e["xla"] for e in ph["epochs"]] if jax_events else None,
            "xla_seconds": sum(e["xla_seconds"] for e in ph["epochs"]) if jax_events else None,
            "epoch_seconds": ph["seconds"]}
        for n, ph in phases.items()}
    report["compile_counting"] = (
        "programs: new input signatures of the wrapped train_step (shapes, dtypes); traces: "
        "its Python calls (a jit or tf.function trace each)" +
        ("; xla: JAX backend-compile events named train_step" if jax_events else
         "; XLA compiles behind TensorFlow's traces not counted" if plan.jit_compile else ""))
    report["train"] = {name: {k: phases[name][k] for k in
                              ("images_per_second", "min", "max", "rounds")}
                       for name in ("memory", "pipeline")}
    for name in ("memory", "pipeline"):
        r = report["train"][name]
        print(f"train       {name:8s} {r['images_per_second']:9.1f} images/s "
              f"({r['min']:.1f}..{r['max']:.1f}, {r['rounds']} epochs of {args.steps} steps)"
              f"   anchor {ANCHOR} ({ANCHOR_TEXT}): x{r['images_per_second'] / ANCHOR:.3f}",
              flush=True)
    report["train"]["also"] = [also_row(args, plan, counter, batch, precision)
                               for batch, precision in parse_also(args.also, args.batch)]
    return model


def also_row(args, plan, counter: Counter, batch: int, precision: str) -> dict:
    """In-memory training throughput of a fresh fixed-size model at another batch size or
    precision (its own compile)."""
    import keras

    row_plan = plan.with_batch(batch)
    policy = precision or plan.precision
    keras.config.set_dtype_policy(policy)
    try:
        extra = build(args, plan, batch_plan=row_plan)
        counter.wrap(extra)
        recorder = epoch_recorder(keras, counter)
        fit(extra, in_memory(args.size, row_plan.global_batch, args.seed), 1 + args.rounds,
            args.steps, recorder)
        row = {"batch": row_plan.global_batch, "precision": policy,
               **throughput(recorder.seconds[1:], args.steps, row_plan.global_batch),
               "first_epoch_seconds": round(recorder.seconds[0], 1)}
        print(f"train       memory   {row['images_per_second']:9.1f} images/s at batch "
              f"{row['batch']}, {policy} ({row['min']:.1f}..{row['max']:.1f}; first epoch "
              f"{row['first_epoch_seconds']} s)   anchor {ANCHOR}: "
              f"x{row['images_per_second'] / ANCHOR:.3f}", flush=True)
    except Exception as e:  # out of memory at a large batch, say: a row, not a crash
        row = {"batch": row_plan.global_batch, "precision": policy,
               "error": f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"}
        print(f"train       memory   batch {row['batch']} {policy}: {row['error']}", flush=True)
    finally:
        keras.config.set_dtype_policy(plan.precision)
    return row


def checkpoint_section(args, model, work: Path, report: dict) -> None:
    report["checkpoint"] = ck = checkpoint_figures(model, work, args.rounds)
    print(f"checkpoint  model.save {ck['save_seconds']:.3f} s, "
          f"{ck['save_bytes'] / 1e6:.2f} MB | backup (.npz) {ck['backup_seconds']:.3f} s, "
          f"{ck['backup_bytes'] / 1e6:.2f} MB, load {ck['load_backup_seconds']:.3f} s "
          f"| save_weights {ck['save_weights_seconds']:.3f}"
          f" s, {ck['save_weights_bytes'] / 1e6:.2f} MB | load_weights "
          f"{ck['load_weights_seconds']:.3f} s", flush=True)


def predict_section(args, plan, model, counter: Counter, report: dict) -> None:
    """On the model at its size, as a run saves it."""
    from corolla import models

    with plan.inference_scope():
        fixed = models.at_size(model, args.size)
    counter.wrap(fixed)
    report["predict"] = pr = predict_figures(fixed, counter, args.size, plan.inference_batch,
                                             args.predict_batches, args.rounds, args.seed)
    print(f"predict     uint8 {pr['uint8']['images_per_second']:.1f} images/s, float32 "
          f"{pr['float32']['images_per_second']:.1f} images/s: uint8/float32 "
          f"x{pr['ratio']:.2f} (predict_step signatures "
          f"{len(pr['uint8']['compiles']['signatures'])} + "
          f"{len(pr['float32']['compiles']['signatures'])})", flush=True)


def checks(report: dict) -> dict:
    out = {}
    c = report.get("compiles")
    if c:
        out["one compile per size"] = all(ph["programs"][0] == 1 for n, ph in c.items()
                                          if n != "pipeline")
        out["none per epoch"] = all(not any(ph["traces"][1:]) for ph in c.values())
        out["none for the pipeline's batches"] = not any(c["pipeline"]["traces"])
        if c["small"]["xla"] is not None:
            out["one XLA compile of the step per size"] = all(
                ph["xla"][0] == 1 and not any(ph["xla"][1:]) for n, ph in c.items()
                if n != "pipeline") and not any(c["pipeline"]["xla"])
    if "predict" in report:
        out["predict: one compile per input dtype"] = all(
            len(report["predict"][k]["compiles"]["signatures"]) == 1
            for k in ("uint8", "float32"))
    det = report.get("determinism") or []
    if det:
        out["bit-identical under --deterministic"] = bool(det[0].get("bit_identical"))
    return out


def print_table(report: dict) -> None:
    plan, args = report["plan"], report["args"]
    rows = [("device", report["device"]),
            ("backend / precision", f"{plan['backend']} / {plan['precision']}, jit_compile "
                                    f"{plan['jit_compile']}, {plan['strategy']}")]
    if "compiles" in report:
        tr = report["train"]
        rows += [("compiles per epoch (programs)",
                  ", ".join(f"{n} {ph['size']} px {ph['programs']}"
                            for n, ph in report["compiles"].items())),
                 (f"train images/s, {args['model']} {args['size']} px, batch "
                  f"{plan['global_batch']}",
                  f"{tr['memory']['images_per_second']:.1f} in memory, "
                  f"{tr['pipeline']['images_per_second']:.1f} through the pipeline"),
                 ("  anchor", f"{ANCHOR} ({ANCHOR_TEXT}): memory x"
                              f"{tr['memory']['images_per_second'] / ANCHOR:.3f}")]
        for row in tr["also"]:
            rows.append((f"  batch {row['batch']}, {row['precision']}",
                         row.get("error") or f"{row['images_per_second']:.1f} images/s, x"
                                             f"{row['images_per_second'] / ANCHOR:.3f} the "
                                             f"anchor"))
    if "checkpoint" in report:
        ck = report["checkpoint"]
        rows += [("checkpoint .keras", f"{ck['save_seconds']:.3f} s, "
                                       f"{ck['save_bytes'] / 1e6:.2f} MB"),
                 ("backup .npz", f"{ck['backup_seconds']:.3f} s, "
                                 f"{ck['backup_bytes'] / 1e6:.2f} MB (load "
                                 f"{ck['load_backup_seconds']:.3f} s)"),
                 ("checkpoint .weights.h5", f"{ck['save_weights_seconds']:.3f} s, "
                                            f"{ck['save_weights_bytes'] / 1e6:.2f} MB (load "
                                            f"{ck['load_weights_seconds']:.3f} s)")]
    if "predict" in report:
        pr = report["predict"]
        rows.append(("predict images/s", f"uint8 {pr['uint8']['images_per_second']:.1f}, "
                                         f"float32 {pr['float32']['images_per_second']:.1f} "
                                         f"(x{pr['ratio']:.2f})"))
    for d in report.get("determinism", []):
        rows.append((f"repeat: {d['switches']}",
                     d.get("error", "")[:60] or ("bit-identical" if d["bit_identical"] else
                                                 f"differs (max |diff| {d['max_abs_diff']:.3g})")))
    rows += [(f"check: {k}", "ok" if v else "NOT AS EXPECTED") for k, v in
             report["checks"].items()]
    width = max(len(k) for k, _ in rows)
    print()
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print(f"{'total':<{width}}  {report['seconds']} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())

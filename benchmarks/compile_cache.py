"""JAX's persistent compilation cache, measured: EfficientNet-B0's first training step on JAX in
a first process (compiles, writes the cache) and in a second one (loads it), side by side.

    python benchmarks/compile_cache.py [--model efficientnet_b0] [--size 224] [--batch 8]

Each process: `runtime.detect(backend="jax", compile_cache=FOLDER)`, the model built and
compiled as Corolla does (Adam, sparse categorical cross-entropy), then the seconds of its
first `train_on_batch` and of a second one (the step itself). The folder is a fresh temporary
one; its files and bytes after each process are printed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(folder: str, model_name: str, size: int, batch: int) -> dict:
    from corolla import models, runtime

    plan = runtime.detect(backend="jax", compile_cache=folder)
    import keras
    import numpy as np

    with plan.scope():
        model = models.create_model(model_name, 5, size)
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    x = np.random.default_rng(0).uniform(0, 255, (batch, size, size, 3)).astype("float32")
    y = np.arange(batch) % 5
    start = time.perf_counter()
    model.train_on_batch(x, y)
    first = time.perf_counter() - start
    start = time.perf_counter()
    model.train_on_batch(x, y)
    step = time.perf_counter() - start
    return {"backend": keras.backend.backend(), "first_step_s": round(first, 1),
            "next_step_s": round(step, 2)}


def _usage(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="efficientnet_b0")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.model, args.size, args.batch)))
        return
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "")}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "jax-compile"
        for name in ("first process", "second process"):
            out = subprocess.run([sys.executable, __file__, "--child", str(folder), "--model",
                                  args.model, "--size", str(args.size), "--batch",
                                  str(args.batch)], env=env, capture_output=True, text=True,
                                 check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            files, size = _usage(folder)
            print(f"{name:15s} {args.model} {args.size} px batch {args.batch} on "
                  f"{row['backend']}: first step {row['first_step_s']:6.1f} s, next step "
                  f"{row['next_step_s']:5.2f} s; cache {files} files, {size / 2**20:.1f} MiB",
                  flush=True)


if __name__ == "__main__":
    main()

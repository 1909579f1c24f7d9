"""Training throughput per Keras backend on this machine, side by side in one run.

Why: `--backend auto` picks TensorFlow on CPUs because it trains these convnets several times
faster there than JAX or TensorFlow with XLA. This benchmark keeps that claim measured, and
measures mixed_bfloat16 beside float32 (`--precision auto` keeps float32 on CPUs): on a CPU
with bfloat16 instructions (AVX512_BF16, AMX) TensorFlow's oneDNN kernels use them, and the
answer depends on the model (on this 2-core Zen 4: small_cnn at 176 px 1.3-1.6x faster,
efficientnet_lite0 at 192 px 0.7-0.8x, its depthwise convolutions slower in bfloat16).

    python benchmarks/cpu_backends.py [--model efficientnet_b0] [--size 128] [--steps 8]

Each variant runs in its own process (a Keras backend is fixed per process): build the model,
compile, run warm-up steps (compilation), then time `--steps` training steps on random images.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

VARIANTS = {  # name -> (KERAS_BACKEND, jit_compile, precision)
    "tensorflow": ("tensorflow", False, "float32"),
    "tensorflow+xla": ("tensorflow", True, "float32"),
    "jax": ("jax", True, "float32"),
    "tensorflow+bf16": ("tensorflow", False, "mixed_bfloat16"),
    "jax+bf16": ("jax", True, "mixed_bfloat16"),
}


def measure(model_name: str, size: int, batch: int, steps: int, jit: bool,
            precision: str) -> dict:
    import numpy as np

    from corolla import models, runtime
    from corolla.training import compile_model

    plan = runtime.detect(batch_size=batch, precision=precision)
    import keras

    with plan.scope():
        model = models.create_model(model_name, num_classes=104, image_size=size)
        compile_model(model, plan, 1e-3)
        if jit:
            model.jit_compile = True
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (batch, size, size, 3)).astype("float32")
    y = np.eye(104, dtype="float32")[rng.integers(0, 104, batch)]  # the loss takes one-hot
    for _ in range(2):  # compile and warm up
        model.train_on_batch(x, y)
    start = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(x, y)
    seconds = time.perf_counter() - start
    return {"backend": keras.backend.backend(), "jit_compile": jit,
            "images_per_second": steps * batch / seconds, "seconds_per_step": seconds / steps}


def _bfloat16_flags() -> str:
    """The CPU's bfloat16 instruction flags (Linux), e.g. "avx512_bf16"; "" elsewhere."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return ""
    return ", ".join(f for f in flags if f in ("avx512_bf16", "amx_bf16"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="efficientnet_b0")
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        result = measure(args.model, args.size, args.batch, args.steps,
                         *VARIANTS[args._child][1:])
        print("RESULT " + json.dumps(result))
        return

    results = {}
    for name in args.variants.split(","):
        env = {**os.environ, "KERAS_BACKEND": VARIANTS[name][0], "TF_CPP_MIN_LOG_LEVEL": "3",
               "CUDA_VISIBLE_DEVICES": ""}
        cmd = [sys.executable, __file__, "--model", args.model, "--size", str(args.size),
               "--batch", str(args.batch), "--steps", str(args.steps), "--_child", name]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        line = [s for s in out.stdout.splitlines() if s.startswith("RESULT ")]
        if out.returncode or not line:
            print(f"{name}: failed\n{out.stderr[-2000:]}")
            continue
        results[name] = json.loads(line[-1][7:])
        print(f"{name:16s} {results[name]['images_per_second']:8.1f} images/s "
              f"({results[name]['seconds_per_step']:.3f} s/step)", flush=True)
    if "tensorflow" in results:
        base = results["tensorflow"]["images_per_second"]
        print(f"\n{args.model} at {args.size}px, batch {args.batch}, {os.cpu_count()} CPUs "
              f"(bfloat16 instructions: {_bfloat16_flags() or 'none'}):")
        for name, r in results.items():
            print(f"  {name} trains at {r['images_per_second'] / base:.2f}x tensorflow's speed "
                  f"(float32, no XLA)")


if __name__ == "__main__":
    main()

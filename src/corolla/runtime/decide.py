"""The decision table: hardware + cluster + what was asked -> backend, strategy, precision, XLA.

Pure: it sees only the `Hardware` and `Cluster` values the probes return, so every row of the
table is tested with a faked machine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corolla.errors import NO_TENSORFLOW, UserError
from corolla.runtime.hardware import Cluster, Hardware

TF_STRATEGIES = ("tpu", "mirrored", "multiworker", "one_device", "default")
JAX_STRATEGIES = ("data_parallel", "default")
# The one strategy per cluster kind that keeps its processes in step. Under any other, each
# process would train a model of its own, unsynchronised, and only the chief's would be kept.
CLUSTER_STRATEGIES = {"tf_config": "multiworker", "keras": "data_parallel"}


@dataclass(frozen=True)
class Decision:
    backend: str  # "tensorflow" | "jax"
    accelerator: str  # "tpu" | "gpu" | "cpu"
    strategy: str  # one of TF_STRATEGIES or JAX_STRATEGIES
    precision: str  # a Keras dtype policy name
    jit_compile: bool  # compile the train step with XLA (see choose_jit_compile)
    steps_per_execution: int = 1  # at most (see choose_steps_per_execution, Plan.fit_steps)


def choose_backend(requested: str, hw: Hardware, env_backend: str | None = None,
                   cluster: Cluster = Cluster()) -> str:
    """auto: JAX wherever JAX sees a TPU, since Keras 3 + TPUStrategy fails on current TPU VM
    images (keras-team/keras#19448) and Keras' distribution guide covers only JAX; TensorFlow
    where it can use the GPUs present, and on CPU (with oneDNN it trains convnets several times
    faster there than JAX); JAX where only JAX sees the accelerator, or where
    KERAS_DISTRIBUTION_* asks for JAX processes. KERAS_BACKEND stands in for `auto`."""
    if requested == "auto":
        requested = env_backend or ("jax" if cluster.kind == "keras" else "auto")
    if requested not in ("auto", "tensorflow", "jax"):
        raise UserError(f"backend must be auto, tensorflow or jax, got {requested!r}"
                        " (from KERAS_BACKEND or --backend)")
    if requested != "auto":
        if not getattr(hw, requested):
            if requested == "tensorflow":
                raise UserError(NO_TENSORFLOW)
            raise UserError("the jax backend was asked for but jax is not installed; run: "
                            "pip install 'corolla[jax]'")
        return requested
    if hw.jax_platform == "tpu":
        return "jax"
    if hw.tpu or hw.gpus:
        return "tensorflow"
    if hw.jax_platform == "gpu":
        return "jax"
    return "tensorflow" if hw.tensorflow else "jax"


def accelerator(backend: str, hw: Hardware) -> str:
    if backend == "tensorflow":
        return "tpu" if hw.tpu else "gpu" if hw.gpus else "cpu"
    return hw.jax_platform or "cpu"


def _check_cluster_strategy(requested: str, cluster: Cluster) -> None:
    """Refuses an explicit strategy that cannot span the cluster's processes: each would train
    its own model and nothing would say so until the results disagreed."""
    needed = CLUSTER_STRATEGIES.get(cluster.kind)
    if cluster.num_processes < 2 or needed is None or requested in ("auto", needed):
        return
    source = ("TF_CONFIG's TensorFlow workers" if cluster.kind == "tf_config"
              else "the JAX processes of KERAS_DISTRIBUTION_*")
    raise UserError(f"--strategy {requested} cannot span {source} ({cluster.num_processes} "
                    f"processes): each would train its own unsynchronised model; use "
                    f"--strategy {needed} or auto")


def choose_strategy(requested: str, backend: str, hw: Hardware, cluster: Cluster) -> str:
    if backend == "jax":
        if cluster.kind == "tf_config":
            raise UserError("TF_CONFIG configures TensorFlow workers but the backend is jax; for "
                            "several JAX processes set KERAS_DISTRIBUTION_JOB_ADDRESSES, "
                            "KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID")
        _check_cluster_strategy(requested, cluster)
        if requested == "auto":
            return "data_parallel" if hw.jax_devices > 1 or cluster.num_processes > 1 else "default"
        if requested not in JAX_STRATEGIES:
            raise UserError(f"strategy {requested!r} is a TensorFlow strategy; with the jax "
                            f"backend use one of: auto, {', '.join(JAX_STRATEGIES)} (or pass "
                            f"--backend tensorflow)")
        return requested

    if cluster.kind == "keras":
        raise UserError("KERAS_DISTRIBUTION_* configures JAX processes but the backend is "
                        "tensorflow; for several TensorFlow workers set TF_CONFIG, or use "
                        "--backend jax")
    _check_cluster_strategy(requested, cluster)
    if requested == "auto":
        if hw.tpu and cluster.num_processes > 1:
            raise UserError(f"TF_CONFIG names {cluster.num_processes} workers, but TPUStrategy "
                            f"cannot span them; on TPU hosts use the jax backend with "
                            f"KERAS_DISTRIBUTION_*, or unset TF_CONFIG")
        if hw.tpu:
            return "tpu"
        if cluster.num_processes > 1:
            return "multiworker"
        if hw.gpus > 1 or (not hw.gpus and hw.cpus > 1):
            return "mirrored"
        return "one_device" if hw.gpus == 1 else "default"
    if requested not in TF_STRATEGIES:
        raise UserError(f"strategy {requested!r} is a JAX distribution; with the tensorflow "
                        f"backend use one of: auto, {', '.join(TF_STRATEGIES)}")
    if requested == "tpu" and not hw.tpu:
        raise UserError("--strategy tpu but TensorFlow found no TPU (tried "
                        "TPUClusterResolver(tpu='local') and TPU_NAME); use --strategy auto")
    if requested == "multiworker" and cluster.num_processes < 2:
        raise UserError("--strategy multiworker needs TF_CONFIG naming at least 2 workers; "
                        "set TF_CONFIG or use --strategy auto")
    return requested


# GPUs whose float16 training gives NaN losses: the GeForce GTX 16xx and the T-series Quadros
# (T400-T2000; compute capability 7.5, Turing without working float16 tensor cores), and the
# Tesla K40m. The list is Ultralytics' (`check_amp` in ultralytics/utils/checks.py, extended in
# ultralytics/ultralytics PR #17977), matched on the name the driver reports.
FLOAT16_BROKEN = re.compile(r"(nvidia|geforce|quadro|tesla).*?"
                            r"(1630|1650|1660|t400|t550|t600|t1000|t1200|t2000|k40m)", re.I)


def choose_precision(requested: str, accel: str, hw: Hardware, backend: str) -> str:
    """bfloat16 on TPUs and on NVIDIA GPUs that compute in it (compute capability >= 8.0:
    A100, L4, H100): float32's range, so no loss scaling, hence no skipped steps and no
    loss-scale state; the tensor cores run it as fast as float16. float16 on the older tensor
    cores (7.x: V100, T4; Keras wraps the optimizer in a LossScaleOptimizer) except on the cards
    known to give NaN losses with it (FLOAT16_BROKEN), float32 elsewhere (on CPU mixed
    precision is slower than float32)."""
    if requested != "auto":
        return requested
    if accel == "tpu":
        return "mixed_bfloat16"
    if accel == "gpu":
        cc = hw.gpu_compute_capability if backend == "tensorflow" else hw.jax_compute_capability
        cc = tuple(cc) if cc else ()
        if cc >= (8, 0):
            return "mixed_bfloat16"
        if hw.device_name and FLOAT16_BROKEN.search(hw.device_name):
            return "float32"
        return "mixed_float16" if cc >= (7, 0) else "float32"
    return "float32"


# The per-replica batch `recipe auto` gives a GPU or TPU: a memory rule over a table of the
# models' activations, not a probe (a probe would compile the step at several batches first,
# each compile minutes on a GPU). A model's training memory per image is taken as
# ACTIVATION_BYTES x its activations per image (ModelSpec.activations: elements of every
# layer's output at 224 px, benchmarks/activations.py) x (size / 224)^2 x the bytes of its
# compute dtype. ACTIVATION_BYTES (0.55: not every output is kept) is calibrated on the public
# TPU notebooks' EfficientNet-B7 at 512 px, batch 16 per 16 GB TPU v3 core in bfloat16, the
# largest known to fit. MEMORY_SHARE of the device is given to activations (weights, optimizer
# state and XLA's scratch take the rest). At most MAX_BATCH: a batch that large already keeps
# a large card fed (at 64 it is underfed), and past 256 per replica the recipes' learning rates
# (scaled with the batch) are far from where they were tuned (figures:
# docs/benchmarks.md#figures-behind-the-defaults).
ACTIVATION_BYTES = 0.55
MEMORY_SHARE = 0.8
MIN_BATCH, MAX_BATCH = 8, 256
UNKNOWN_ACTIVATIONS = 150.0  # a model not measured (a hub preset): as EfficientNet-B7's


def choose_batch(memory: int, size: int, activations: float, precision: str,
                 examples: int = 0, replicas: int = 1, fallback: int = 16) -> int:
    """The per-replica batch for a device of `memory` bytes and a model of `activations`
    (millions of elements per image at 224 px) at `size` px: a power of two in [MIN_BATCH,
    MAX_BATCH], and no more than `examples` (the train split, when known) fill over `replicas`
    (so that an epoch has a step). `fallback` (the recipe's) when the memory is unknown."""
    if not memory:
        return fallback
    element = 2 if "16" in precision else 4  # mixed_*16 keeps activations in 16 bits
    per_image = ACTIVATION_BYTES * activations * 1e6 * (size / 224) ** 2 * element
    batch = max(MIN_BATCH, min(MAX_BATCH, int(memory * MEMORY_SHARE / per_image)))
    if examples:
        batch = max(1, min(batch, examples // max(replicas, 1)))
    return 1 << (batch.bit_length() - 1)  # rounded down to a power of two


def choose_jit_compile(backend: str, accel: str, strategy: str, hw: Hardware,
                       requested: str = "auto", deterministic: bool = False) -> bool:
    """Whether Keras compiles the train step with XLA: `requested` on or off (runtime.jit_compile,
    which runs an accelerator's setting on CPU), else decided here, not by Keras'
    `jit_compile="auto"`, which turns XLA off under any tf.distribute strategy (so TensorFlow
    GPUs, always under one, would never get it) and on machines without accelerators."""
    if deterministic and backend == "tensorflow" and accel != "tpu":
        # Keras turns XLA off by itself under TensorFlow's op determinism (not every XLA op has
        # a deterministic kernel there), with only a warning: say so in the plan instead.
        if requested == "on":
            raise UserError("--jit-compile on cannot be deterministic on TensorFlow: Keras "
                            "turns XLA off under op determinism; drop --deterministic, or use "
                            "--backend jax (deterministic XLA)")
        return False
    if requested != "auto":
        if requested == "off" and (backend == "jax" or accel == "tpu"):
            raise UserError(f"--jit-compile off is not possible on "
                            f"{'JAX' if backend == 'jax' else 'a TPU'}, which runs XLA "
                            f"programs only; use --jit-compile auto")
        return requested == "on"
    if backend == "jax":
        return True  # JAX runs jitted functions; without jit Keras would run op by op
    if accel == "tpu":
        return True  # a TPU runs XLA programs only
    if accel == "cpu":
        # XLA makes these convnets' CPU steps several times slower (`python
        # benchmarks/cpu_backends.py`; figures: docs/benchmarks.md#figures-behind-the-defaults)
        return False
    if strategy == "multiworker" or (strategy == "mirrored" and hw.gpus > 1):
        # Fails with Keras 3.15 / TF 2.21, as seen on CPU: under MirroredStrategy Keras compiles
        # the whole multi-replica step as one XLA program, which may not touch another device's
        # variables ("Trying to access resource .../replica_1 located in device CPU:1 from
        # device CPU:0", XLA's known issue); under MultiWorkerMirroredStrategy XLA has no CPU
        # collectives. Untried on GPUs, where Keras' own "auto" keeps XLA off here too.
        return False
    return True  # one GPU (one_device, default, a one-GPU mirrored): XLA fuses the step's ops


def choose_steps_per_execution(requested: int, accel: str, backend: str) -> int:
    """`requested` (runtime.steps_per_execution) when set; else several steps per host
    round-trip on TensorFlow TPUs, whose `tf.function` loops over them on the device
    (Plan.fit_steps fits each epoch to whole executions). On CPU/GPU the gain is small, and
    under multi-replica MirroredStrategy Keras 3 fails with more than 1. Keras 3's JAX trainer
    runs K steps per execution as K calls of the one-step program from Python (its
    `_make_function`): nothing saved, and epochs would be rounded down to K steps for it."""
    if requested:
        return requested
    return 16 if accel == "tpu" and backend == "tensorflow" else 1


def decide(hw: Hardware, cluster: Cluster, *, backend: str = "auto", strategy: str = "auto",
           precision: str = "auto", env_backend: str | None = None, jit_compile: str = "auto",
           steps_per_execution: int = 0, deterministic: bool = False) -> Decision:
    chosen = choose_backend(backend, hw, env_backend, cluster)
    accel = accelerator(chosen, hw)
    strategy = choose_strategy(strategy, chosen, hw, cluster)
    return Decision(backend=chosen, accelerator=accel, strategy=strategy,
                    precision=choose_precision(precision, accel, hw, chosen),
                    jit_compile=choose_jit_compile(chosen, accel, strategy, hw, jit_compile,
                                                   deterministic),
                    steps_per_execution=choose_steps_per_execution(steps_per_execution, accel,
                                                                   chosen))

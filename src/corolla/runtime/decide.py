"""The decision table: hardware + cluster + what was asked -> backend, strategy, precision.

Pure: it sees only the `Hardware` and `Cluster` values the probes return, so every row of the
table is tested with a faked machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from corolla.errors import UserError
from corolla.runtime.hardware import Cluster, Hardware

TF_STRATEGIES = ("tpu", "mirrored", "multiworker", "one_device", "default")
JAX_STRATEGIES = ("data_parallel", "default")


@dataclass(frozen=True)
class Decision:
    backend: str  # "tensorflow" | "jax"
    accelerator: str  # "tpu" | "gpu" | "cpu"
    strategy: str  # one of TF_STRATEGIES or JAX_STRATEGIES
    precision: str  # a Keras dtype policy name


def choose_backend(requested: str, hw: Hardware, env_backend: str | None = None,
                   cluster: Cluster = Cluster()) -> str:
    """auto: TensorFlow where it can use the accelerators present, and on CPU (with oneDNN it
    trains convnets several times faster there than JAX); JAX where only JAX sees the TPU or GPU
    (Kaggle's TPU VMs ship a CPU-only TensorFlow), or where KERAS_DISTRIBUTION_* asks for JAX
    processes. KERAS_BACKEND (or an already imported Keras) stands in for `auto`."""
    if requested == "auto":
        requested = env_backend or ("jax" if cluster.kind == "keras" else "auto")
    if requested not in ("auto", "tensorflow", "jax"):
        raise UserError(f"backend must be auto, tensorflow or jax, got {requested!r}"
                        " (from KERAS_BACKEND or --backend)")
    if requested != "auto":
        if not getattr(hw, requested):
            extra = "pip install 'corolla[jax]'" if requested == "jax" else "pip install tensorflow"
            raise UserError(f"the {requested} backend was asked for but {requested} is not "
                            f"installed; run: {extra}")
        return requested
    if hw.tpu or hw.gpus:
        return "tensorflow"
    if hw.jax_platform in ("tpu", "gpu"):
        return "jax"
    return "tensorflow" if hw.tensorflow else "jax"


def accelerator(backend: str, hw: Hardware) -> str:
    if backend == "tensorflow":
        return "tpu" if hw.tpu else "gpu" if hw.gpus else "cpu"
    return hw.jax_platform or "cpu"


def choose_strategy(requested: str, backend: str, hw: Hardware, cluster: Cluster) -> str:
    if backend == "jax":
        if cluster.kind == "tf_config":
            raise UserError("TF_CONFIG configures TensorFlow workers but the backend is jax; for "
                            "several JAX processes set KERAS_DISTRIBUTION_JOB_ADDRESSES, "
                            "KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID")
        if requested == "auto":
            return "data_parallel" if hw.jax_devices > 1 or cluster.num_processes > 1 else "default"
        if requested not in JAX_STRATEGIES:
            raise UserError(f"strategy {requested!r} is a TensorFlow strategy; with the jax "
                            f"backend use one of: auto, {', '.join(JAX_STRATEGIES)}")
        return requested

    if cluster.kind == "keras":
        raise UserError("KERAS_DISTRIBUTION_* configures JAX processes but the backend is "
                        "tensorflow; for several TensorFlow workers set TF_CONFIG, or use "
                        "--backend jax")
    if requested == "auto":
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


def choose_precision(requested: str, accel: str, hw: Hardware, backend: str) -> str:
    """bfloat16 on TPU, float16 on NVIDIA GPUs with tensor cores (compute capability >= 7.0),
    float32 elsewhere. Keras adds loss scaling for float16 by itself."""
    if requested != "auto":
        return requested
    if accel == "tpu":
        return "mixed_bfloat16"
    if accel == "gpu":
        cc = hw.gpu_compute_capability if backend == "tensorflow" else hw.jax_compute_capability
        return "mixed_float16" if cc and tuple(cc) >= (7, 0) else "float32"
    return "float32"


def decide(hw: Hardware, cluster: Cluster, *, backend: str = "auto", strategy: str = "auto",
           precision: str = "auto", env_backend: str | None = None) -> Decision:
    chosen = choose_backend(backend, hw, env_backend, cluster)
    accel = accelerator(chosen, hw)
    return Decision(backend=chosen, accelerator=accel,
                    strategy=choose_strategy(strategy, chosen, hw, cluster),
                    precision=choose_precision(precision, accel, hw, chosen))

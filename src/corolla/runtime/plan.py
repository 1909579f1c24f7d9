"""The distribution plan: made once by `detect()`, used by every other layer.

It holds the chosen backend, the live strategy (TensorFlow) or Keras distribution (JAX), the
replica and process counts, the global batch and the precision policy. Nothing outside
`corolla.runtime` reads devices or environment variables.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from dataclasses import dataclass, field

from corolla.errors import NO_TENSORFLOW, UserError
from corolla.runtime.compile_cache import enable_compile_cache
from corolla.runtime import hardware, tflog
from corolla.runtime.decide import Decision, decide
from corolla.runtime.hardware import Cluster, Hardware
from corolla.runtime.multiworker import apply_keras_multiworker_fixes

STRATEGY_NAMES = {"tpu": "TPUStrategy", "mirrored": "MirroredStrategy",
                  "multiworker": "MultiWorkerMirroredStrategy", "one_device": "OneDeviceStrategy",
                  "data_parallel": "DataParallel"}


@dataclass
class Plan:
    backend: str
    accelerator: str
    strategy_name: str
    devices: int  # devices this process drives
    replicas: int  # num_replicas_in_sync: model copies over all processes
    num_processes: int
    process_id: int
    is_chief: bool  # only the chief writes a run's final artefacts
    batch_per_replica: int
    global_batch: int
    precision: str
    steps_per_execution: int  # at most; see fit_steps
    jit_compile: bool  # XLA for the train step (decide.choose_jit_compile): pass it to compile
    hardware: Hardware = field(repr=False)
    strategy: object = field(default=None, repr=False)  # tf.distribute.Strategy (TensorFlow)
    distribution: object = field(default=None, repr=False)  # keras.distribution (JAX)
    # A TPU or GPU the machine shows that no framework can use, and why (see detect).
    unused_accelerator: str | None = None
    compile_cache: str | None = None  # JAX's persistent compilation cache folder, if used

    def scope(self):
        """Where models and optimizers must be created."""
        if self.strategy is not None:
            return self.strategy.scope()
        if self.distribution is not None:
            return self.distribution.scope()
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def inference_scope(self):
        """Where one process alone may run a model: the plan's scope in a single-process job;
        in a multi-process job (where the strategy's collectives would wait for the other
        processes) plain local devices."""
        if not self.multi_worker:
            with self.scope():
                yield
        elif self.distribution is not None:
            import keras

            keras.distribution.set_distribution(None)
            try:
                yield
            finally:
                keras.distribution.set_distribution(self.distribution)
        else:
            yield  # outside strategy.scope() TensorFlow uses the default strategy

    @property
    def multi_worker(self) -> bool:
        return self.num_processes > 1

    @property
    def inference_batch(self) -> int:
        """The batch for `inference_scope`: this process's devices only in a multi-process job."""
        return self.batch_per_replica * self.devices if self.multi_worker else self.global_batch

    def inference_batch_for(self, count: int) -> int:
        """`inference_batch`, or for fewer than that many images the fewest whole parts of it
        (a part a device) that hold them: padding a few images to a vast batch would decode
        blank images for nothing."""
        parts = self.inference_batch // self.batch_per_replica
        return min(self.inference_batch, parts * -(-count // parts)) if count else \
            self.inference_batch

    @property
    def input_shard(self) -> tuple[int, int]:
        """(number of shards, this process's shard) of the training input: every process reads
        and decodes only its own part of the data."""
        return self.num_processes, self.process_id

    @property
    def process_batch(self) -> int:
        """This process's share of every global batch: the examples it reads and decodes per
        training step (`input_shard`)."""
        return self.global_batch // self.num_processes

    @property
    def input_batch(self) -> int:
        """The batch of this process's training stream. TensorFlow: the global batch, which
        tf.distribute cuts into per-replica parts (a worker's stream thus feeds it for as many
        steps as there are workers). JAX: this process's part of the global batch
        (`process_batch`), which Keras joins with the other processes' parts into one global
        array (`_jax_distribution` turns Keras' own sharding off: it would have every process
        decode the whole global batch and keep its part)."""
        return self.global_batch if self.backend == "tensorflow" else self.process_batch

    @property
    def static_shapes(self) -> bool:
        """TPUs compile one program per input shape: feed them full batches only."""
        return self.accelerator == "tpu"

    def fit_steps(self, steps: int) -> tuple[int, int]:
        """(steps per epoch, steps_per_execution) for an epoch of about `steps` steps. Keras runs
        whole executions, so an epoch of 99 steps at 16 per execution would run 112 and end the
        learning rate schedule early: the epoch is rounded down to whole executions, and an
        epoch shorter than one execution becomes one execution of its own length."""
        if steps < 1:
            raise ValueError(f"an epoch needs at least 1 step, got {steps}")
        per_execution = min(self.steps_per_execution, steps)
        return steps - steps % per_execution, per_execution

    def with_batch(self, batch_size: int, global_batch_size: int = 0) -> Plan:
        """The plan with the batch a config asks for (a recipe may set it after the hardware
        was detected with the defaults): `global_batch` decides, as for `detect`."""
        per_replica, total = global_batch(self.replicas, batch_size, global_batch_size)
        if (per_replica, total) == (self.batch_per_replica, self.global_batch):
            return self
        return dataclasses.replace(self, batch_per_replica=per_replica, global_batch=total)

    def to_dict(self) -> dict:
        hw = self.hardware
        return {
            "accelerator": self.accelerator,
            "devices": self.devices,
            "hardware": {"tpu": hw.tpu, "tpu_cores": hw.tpu_cores, "gpus": hw.gpus,
                         "cpu_devices": hw.cpus, "jax_platform": hw.jax_platform,
                         "jax_devices": hw.jax_devices, "device_name": hw.device_name,
                         "device_memory": hw.device_memory},
            "backend": self.backend,
            "strategy": self.strategy_name,
            "replicas": self.replicas,
            "num_processes": self.num_processes,
            "process_id": self.process_id,
            "is_chief": self.is_chief,
            "batch_per_replica": self.batch_per_replica,
            "global_batch": self.global_batch,
            "precision": self.precision,
            "steps_per_execution": self.steps_per_execution,
            "jit_compile": self.jit_compile,
            "unused_accelerator": self.unused_accelerator,
            "compile_cache": self.compile_cache,
        }


def global_batch(replicas: int, batch_size: int, global_batch_size: int = 0) -> tuple[int, int]:
    """(per-replica, global) batch. A fixed global batch must split evenly over the replicas."""
    if global_batch_size:
        if global_batch_size % replicas:
            raise UserError(f"global batch size ({global_batch_size}) must be divisible by the "
                            f"number of replicas ({replicas}); use a multiple of {replicas}")
        return global_batch_size // replicas, global_batch_size
    return batch_size, batch_size * replicas


def probe(backend: str = "auto") -> tuple[Hardware, Cluster, str | None]:
    """Runs only the probes the decision needs: JAX is asked only where it may matter, since
    asking it claims the accelerators and, in a multi-process job, joins the job; TensorFlow
    is not connected to a TPU that JAX has (connecting claims it too)."""
    cluster = hardware.read_cluster()
    env_backend = hardware.env_backend()
    want = backend if backend != "auto" else (env_backend or "auto")
    if want == "auto" and (cluster.kind == "keras" or hardware.jax_joined()):
        want = "jax"
    found = {"tensorflow": hardware.installed("tensorflow"), "jax": hardware.installed("jax"),
             "accelerator_hint": hardware.accelerator_hint()}
    if not found["tensorflow"]:  # the input pipeline is tf.data whatever the backend
        raise UserError(NO_TENSORFLOW)
    if want == "auto" and found["jax"] and hardware.tpu_hint():
        # A TPU JAX can see runs on JAX (decide.choose_backend), and connecting TensorFlow to
        # it first would claim it: ask JAX first, and leave TensorFlow to the input pipeline.
        found.update(hardware.probe_jax(cluster))
        if found["jax_platform"] == "tpu":
            want = "jax"
    # `import tensorflow` imports Keras, which fixes its backend from KERAS_BACKEND: name the
    # likely one before the TensorFlow probe (`use_keras_backend` switches if the decision
    # differs).
    os.environ["KERAS_BACKEND"] = "tensorflow" if want == "auto" else want
    if found["tensorflow"] and want in ("auto", "tensorflow"):
        found.update(hardware.probe_tensorflow(cluster))
    tf_accelerated = found.get("tpu") or found.get("gpus")
    ask_jax = want == "jax" or (want == "auto" and not tf_accelerated and
                                (found["accelerator_hint"] or not found["tensorflow"]))
    if found["jax"] and ask_jax and "jax_platform" not in found:
        found.update(hardware.probe_jax(cluster))
    if "jax_processes" in found:
        cluster = hardware.joined(cluster, found["jax_processes"], found["jax_process_id"])
    return Hardware(**found), cluster, env_backend


@tflog.quiet  # it imports TensorFlow, often first: as quiet as the commands
def detect(backend: str = "auto", strategy: str = "auto", precision: str = "auto",
           batch_size: int = 16, global_batch_size: int = 0, jit_compile: str = "auto",
           steps_per_execution: int = 0, deterministic: bool = False,
           compile_cache: str = "auto") -> Plan:
    """Finds the hardware, decides, and builds the strategy or distribution. On JAX, points
    its persistent compilation cache at `compile_cache` (runtime.compile_cache) first.

    Call it before the first `import keras` of the process: it selects the Keras backend.
    `deterministic` (train.deterministic) must be known here: XLA reads its flags once, when
    JAX first touches a device.
    """
    if deterministic:
        hardware.deterministic_xla()
    found, cluster, env_backend = probe(backend)
    # What decides: the machine found, or the one a test describes (see `described`).
    hw = dataclasses.replace(found, **_DESCRIBED[-1]) if _DESCRIBED else found
    decision = decide(hw, cluster, backend=backend, strategy=strategy, precision=precision,
                      env_backend=env_backend, jit_compile=jit_compile,
                      steps_per_execution=steps_per_execution, deterministic=deterministic)
    keras = hardware.use_keras_backend(decision.backend)
    cache = None
    if decision.backend == "jax":  # before anything compiles (TensorFlow keeps no such cache)
        cache = enable_compile_cache(compile_cache)
    if decision.backend == "tensorflow":
        strategy_obj, distribution = _tf_strategy(decision, found), None
        replicas = strategy_obj.num_replicas_in_sync
        devices = replicas // max(cluster.num_processes, 1)
    else:
        strategy_obj, distribution = None, _jax_distribution(decision, keras)
        replicas = len(keras.distribution.list_devices()) if distribution else 1
        devices = max(1, replicas // cluster.num_processes)
    per_replica, total = global_batch(replicas, batch_size, global_batch_size)
    keras.config.set_dtype_policy(decision.precision)
    unused = hardware.unused_accelerator(hw, decision.accelerator)
    if unused and unused not in _SAID:  # once per process, before any training output
        _SAID.add(unused)
        print(f"corolla: {unused}", file=sys.stderr)
    return Plan(backend=decision.backend, accelerator=decision.accelerator,
                strategy_name=STRATEGY_NAMES.get(decision.strategy, "default"),
                devices=devices, replicas=replicas, num_processes=cluster.num_processes,
                process_id=cluster.process_id, is_chief=cluster.is_chief,
                batch_per_replica=per_replica, global_batch=total, precision=decision.precision,
                steps_per_execution=decision.steps_per_execution,
                jit_compile=decision.jit_compile, hardware=hw,
                strategy=strategy_obj, distribution=distribution, unused_accelerator=unused,
                compile_cache=str(cache) if cache else None)


_SAID: set[str] = set()
_DESCRIBED: list[dict] = []


@contextlib.contextmanager
def described(**fields):
    """Test seam: inside it, `detect` decides for a machine whose `Hardware` has `fields` over
    what the probes found (say one 80 GB GPU of compute capability 8.0), while the strategy is
    built on the devices really there, so that a GPU's whole path (recipe auto, batch,
    precision) trains end to end on a CPU (tests/helpers/described_train.py). Reached from
    Python only: no flag, config key or environment variable sets it."""
    unknown = set(fields) - {f.name for f in dataclasses.fields(Hardware)}
    if unknown:
        raise TypeError(f"not Hardware fields: {sorted(unknown)}")
    _DESCRIBED.append(fields)
    try:
        yield
    finally:
        _DESCRIBED.pop()


def detect_for(config) -> Plan:
    """`detect` with a RunConfig's runtime and batch settings."""
    return detect(backend=config.runtime.backend, strategy=config.runtime.strategy,
                  precision=config.runtime.precision, batch_size=config.train.batch_size,
                  global_batch_size=config.train.global_batch_size,
                  jit_compile=config.runtime.jit_compile,
                  steps_per_execution=config.runtime.steps_per_execution,
                  deterministic=config.train.deterministic,
                  compile_cache=config.runtime.compile_cache)


def _tf_strategy(decision: Decision, hw: Hardware):
    import tensorflow as tf

    name = decision.strategy
    if name == "tpu":
        return tf.distribute.TPUStrategy(hw.tpu_resolver)
    if name == "multiworker":
        apply_keras_multiworker_fixes()
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        kind = "GPU" if hw.gpus else "CPU"
        return tf.distribute.MirroredStrategy(
            devices=[d.name for d in tf.config.list_logical_devices(kind)])
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy("/gpu:0" if hw.gpus else "/cpu:0")
    return tf.distribute.get_strategy()


def _jax_distribution(decision: Decision, keras):
    # tf.data runs beside JAX: keep TensorFlow off the accelerators JAX owns.
    import tensorflow as tf

    tf.config.set_visible_devices([], "GPU")
    if decision.strategy != "data_parallel":
        return None
    distribution = keras.distribution.DataParallel(devices=keras.distribution.list_devices(),
                                                   auto_shard_dataset=False)  # see input_batch
    keras.distribution.set_distribution(distribution)
    return distribution

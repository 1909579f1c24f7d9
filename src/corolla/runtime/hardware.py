"""What this machine has: the boundary where Corolla touches devices and the environment.

Every probe lives here so that tests can fake the machine by replacing these functions, and so
that the decision (`corolla.runtime.decide`) stays a pure function of what they return.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
import os
import re
import stat
import sys
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from corolla.errors import UserError, first_line
from corolla.runtime import tflog

# Signs that a TPU may be attached. TPUClusterResolver() is only tried when one is present:
# without it the resolver asks the GCE metadata server, which stalls on machines off Google Cloud.
_TPU_ENV = ("TPU_NAME", "TPU_ACCELERATOR_TYPE", "COLAB_TPU_ADDR", "TPU_WORKER_ID")
# Device files, any number: a container given GPU 3 has only /dev/nvidia3; TPU v4 and older
# VMs show /dev/accel*, v5e and newer /dev/vfio/<group>.
_TPU_DEVICE_FILES = ("accel[0-9]*", "vfio/[0-9]*")
_GPU_DEVICE_FILES = ("nvidia[0-9]*",)
_OTHER_GPU_FILES = ("/dev/dri/renderD128",)  # AMD / Intel: worth asking JAX, not a warning


@dataclass(frozen=True)
class Cluster:
    """The processes of a multi-host job, from TF_CONFIG (TensorFlow) or KERAS_DISTRIBUTION_*
    (JAX); `kind` is "none" for a single process."""

    kind: str = "none"  # "none" | "tf_config" | "keras" (JAX processes)
    num_processes: int = 1
    process_id: int = 0
    is_chief: bool = True
    addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hardware:
    """What the installed frameworks can see. Counts are local to this process's host."""

    tensorflow: bool = True  # TensorFlow is installed
    jax: bool = False  # JAX is installed
    tpu: str | None = None  # "vm" or "node" when TensorFlow connected to a TPU
    tpu_cores: int = 0
    gpus: int = 0  # GPUs TensorFlow can use
    gpu_compute_capability: tuple[int, int] | None = None
    cpus: int = 1  # logical CPU devices (more than 1 only when split on purpose, as in tests)
    jax_platform: str | None = None  # "tpu" / "gpu" / "cpu" when JAX was asked
    jax_devices: int = 0  # all processes' devices, as JAX counts them
    jax_processes: int = 1  # the processes JAX has joined (several on a TPU pod slice)
    jax_process_id: int = 0
    jax_compute_capability: tuple[int, int] | None = None
    accelerator_hint: bool = False  # device files or env vars suggest a TPU or GPU
    # The first accelerator's name ("NVIDIA H100 80GB HBM3", "TPU v5 lite") and memory in bytes
    # (0: unknown), from the framework that sees it: `recipe auto` sizes the batch by them.
    device_name: str | None = None
    device_memory: int = 0
    tpu_resolver: object = field(default=None, compare=False, repr=False)


def installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def env_backend() -> str | None:
    """KERAS_BACKEND. (Whether Keras is imported says nothing: `import tensorflow` imports it.)"""
    return os.environ.get("KERAS_BACKEND") or None


KERAS_BACKENDS = ("tensorflow", "jax", "torch", "numpy", "openvino")  # what Keras can import


def check_env_backend() -> None:
    """A KERAS_BACKEND that Keras cannot import, as one line before any command: every
    `import tensorflow` imports Keras, which then fails with a traceback, even in commands that
    train nothing (convert, check-data). Once Keras is imported its backend is fixed and the
    variable no longer matters."""
    value = env_backend()
    if value is not None and value not in KERAS_BACKENDS and "keras" not in sys.modules:
        raise UserError(f"KERAS_BACKEND={value!r} is not a Keras backend; set it to tensorflow "
                        f"or jax, or unset it (Corolla then chooses)")


def _device_files(patterns, dev: str) -> list[str]:
    return sorted(f for p in patterns for f in glob.glob(os.path.join(dev, p)))


def tpu_hints(environ=os.environ, dev: str = "/dev") -> list[str]:
    """Signs of a TPU: its environment variables and device files."""
    return [f"{k}={environ[k]}" for k in _TPU_ENV if environ.get(k)] + \
        _device_files(_TPU_DEVICE_FILES, dev)


def gpu_hints(environ=os.environ, dev: str = "/dev") -> list[str]:
    """Signs of an NVIDIA GPU: any /dev/nvidiaN, or CUDA_VISIBLE_DEVICES naming devices. Set
    empty or to -1 it hides them all on purpose (as the tests do): then there is none."""
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return []
    named = [f"CUDA_VISIBLE_DEVICES={visible.strip()}"] if visible else []
    return named + _device_files(_GPU_DEVICE_FILES, dev)


def tpu_hint() -> bool:
    return bool(tpu_hints())


def accelerator_hint() -> bool:
    return tpu_hint() or bool(gpu_hints()) or any(map(os.path.exists, _OTHER_GPU_FILES))


def unused_accelerator(hw: Hardware, accelerator: str) -> str | None:
    """One line when the machine shows signs of a TPU or GPU that no framework uses (so the
    run would go to the CPU without a word), with the libraries' own reasons; None otherwise."""
    if accelerator != "cpu":
        return None
    for kind, hints in (("TPU", tpu_hints()), ("GPU", gpu_hints())):
        if hints:
            reasons = "; ".join(r for r in (_tensorflow_reason(hw, kind), _jax_reason(hw, kind))
                                if r)
            return (f"{', '.join(hints)} suggest{'s' if len(hints) == 1 else ''} a {kind}, but "
                    f"neither TensorFlow nor JAX can use one ({reasons}); running on the CPU")
    return None


def _tensorflow_reason(hw: Hardware, kind: str) -> str:
    if not hw.tensorflow:
        return "TensorFlow: not installed"
    import tensorflow as tf

    build = tf.sysconfig.get_build_info()
    if kind == "TPU":
        return (f"TensorFlow {tf.__version__}: TPUClusterResolver found no TPU (tried "
                f"tpu='local' and TPU_NAME)")
    if not build.get("is_cuda_build"):
        return f"TensorFlow {tf.__version__}: built without CUDA"
    return f"TensorFlow {tf.__version__} (CUDA {build.get('cuda_version')}): {_cuda_driver()}"


def _cuda_driver() -> str:
    """What NVIDIA's driver says when asked as TensorFlow asks it (cuInit), which TensorFlow
    logs only below TF_CPP_MIN_LOG_LEVEL=3."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        return f"NVIDIA's driver library libcuda.so.1 does not load ({e})"
    code = cuda.cuInit(0)
    if code == 0:
        return "the driver works, so a CUDA library TensorFlow needs is missing or mismatched " \
               "(TF_CPP_MIN_LOG_LEVEL=0 lists them)"
    text = ctypes.c_char_p()
    cuda.cuGetErrorName(code, ctypes.byref(text))
    return f"cuInit failed: {(text.value or b'error %d' % code).decode()}"


def _jax_reason(hw: Hardware, kind: str) -> str:
    if not hw.jax:
        return "JAX: not installed"
    import jax

    try:
        jax.devices(kind.lower())
    except RuntimeError as e:
        return f"JAX {jax.__version__}: {first_line(e)}"
    return f"JAX {jax.__version__}: sees a {kind} that another process may hold"


def read_cluster(environ=os.environ) -> Cluster:
    """Parses TF_CONFIG or KERAS_DISTRIBUTION_*; malformed values are user errors."""
    if environ.get("TF_CONFIG"):
        return _parse_tf_config(environ["TF_CONFIG"])
    if environ.get("KERAS_DISTRIBUTION_JOB_ADDRESSES"):
        return _parse_keras_env(environ)
    return Cluster()


_TF_CONFIG_SHAPE = ('expected {"cluster": {"worker": ["host:port", ...]}, '
                    '"task": {"type": "worker", "index": N}}')


def _parse_tf_config(text: str) -> Cluster:
    try:
        tf_config = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"TF_CONFIG is not valid JSON ({e}); {_TF_CONFIG_SHAPE}") from None
    cluster, task = (tf_config.get("cluster"), tf_config.get("task")) \
        if isinstance(tf_config, dict) else (None, None)
    if not isinstance(cluster, dict) or not isinstance(task, dict):
        raise UserError(f"TF_CONFIG needs a 'cluster' and a 'task' object, got {text!r}; "
                        f"{_TF_CONFIG_SHAPE}")
    jobs = {k: v for k, v in cluster.items() if k in ("chief", "worker")}
    if not jobs or not all(isinstance(v, list) and v for v in jobs.values()):
        raise UserError(f"TF_CONFIG cluster must list 'worker' (and optionally 'chief') "
                        f"addresses, got {cluster!r}; {_TF_CONFIG_SHAPE}")
    kind, index = task.get("type"), task.get("index", 0)
    if kind not in jobs or not isinstance(index, int) or not 0 <= index < len(jobs[kind]):
        raise UserError(f"TF_CONFIG task {task!r} does not name one of the cluster's "
                        f"{', '.join(f'{len(v)} {k}' for k, v in jobs.items())} tasks")
    order = jobs.get("chief", []) + jobs.get("worker", [])
    process_id = index + (len(jobs.get("chief", [])) if kind == "worker" else 0)
    return Cluster(kind="tf_config", num_processes=len(order), process_id=process_id,
                   is_chief=process_id == 0, addresses=tuple(order))


def _parse_keras_env(environ) -> Cluster:
    addresses = tuple(a for a in environ["KERAS_DISTRIBUTION_JOB_ADDRESSES"].split(",") if a)
    try:
        num = int(environ.get("KERAS_DISTRIBUTION_NUM_PROCESSES", len(addresses)))
        pid = int(environ.get("KERAS_DISTRIBUTION_PROCESS_ID", "-1"))
    except ValueError:
        raise UserError("KERAS_DISTRIBUTION_NUM_PROCESSES and KERAS_DISTRIBUTION_PROCESS_ID must "
                        "be integers") from None
    if not 0 <= pid < num:
        raise UserError(f"KERAS_DISTRIBUTION_PROCESS_ID must be in [0, {num}), got {pid}")
    return Cluster(kind="keras", num_processes=num, process_id=pid, is_chief=pid == 0,
                   addresses=addresses)


def jax_joined() -> bool:
    """This process already joined a JAX job (`jax.distributed.initialize()` was called, as in a
    notebook on a TPU pod slice): the job is JAX's, whatever else is installed."""
    jax = sys.modules.get("jax")
    is_initialized = getattr(getattr(jax, "distributed", None), "is_initialized", None)
    return bool(is_initialized and is_initialized())


def joined(cluster: Cluster, processes: int, process_id: int) -> Cluster:
    """The cluster as JAX has joined it (`jax.process_count()`, `jax.process_index()`). A TPU pod
    slice, or a notebook that called `jax.distributed.initialize()` itself, spans several
    processes that no KERAS_DISTRIBUTION_* names: read from the environment alone, every host
    would think itself the only one, the chief, and write the run."""
    if processes == cluster.num_processes or cluster.kind == "tf_config":
        return cluster  # TensorFlow workers do not join JAX
    if cluster.kind == "keras":
        raise UserError(f"KERAS_DISTRIBUTION_NUM_PROCESSES says {cluster.num_processes} "
                        f"processes but JAX joined {processes}; start every process of the job "
                        f"with the same KERAS_DISTRIBUTION_* settings")
    return Cluster(kind="keras", num_processes=processes, process_id=process_id,
                   is_chief=process_id == 0)


def find_tpu(resolver_cls=None):
    """Connects to a TPU and initialises it; returns (resolver, "vm" | "node") or (None, None).

    A TPU VM needs tpu="local" (the no-argument resolver raises ValueError there); a TPU node is
    found by the default resolver through TPU_NAME.
    """
    import tensorflow as tf

    resolver_cls = resolver_cls or tf.distribute.cluster_resolver.TPUClusterResolver
    for name, kind in (("local", "vm"), (None, "node")):
        try:
            return resolver_cls.connect(tpu=name), kind
        except (ValueError, tf.errors.NotFoundError, tf.errors.InvalidArgumentError):
            continue
    return None, None


def probe_tensorflow(cluster: Cluster) -> dict:
    """TPU, GPUs and logical CPUs as TensorFlow sees them, without starting its runtime (a
    MultiWorkerMirroredStrategy must be created before the runtime starts)."""
    import tensorflow as tf

    found: dict = {}
    if tpu_hint():
        resolver, kind = find_tpu()
        if resolver is not None:
            found.update(tpu=kind, tpu_resolver=resolver,
                         tpu_cores=resolver.num_accelerators().get("TPU", 0))
    gpus = _list_gpus(tf)
    found["gpus"] = len(gpus)
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        cc = details.get("compute_capability")
        found["gpu_compute_capability"] = tuple(cc) if cc else None
        found.update(device_name=details.get("device_name"), device_memory=_cuda_memory())
    cpu = tf.config.list_physical_devices("CPU")[0]
    found["cpus"] = len(tf.config.get_logical_device_configuration(cpu) or [cpu])
    return found


def _cuda_memory(ordinal: int = 0) -> int:
    """The GPU's memory in bytes as NVIDIA's driver reports it (cuDeviceTotalMem: no context is
    made, so TensorFlow's runtime is not started); 0 when the driver does not answer."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device, total = ctypes.c_int(), ctypes.c_size_t()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), ordinal) or \
                cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device):
            return 0
        return total.value
    except (OSError, AttributeError):
        return 0


def _list_gpus(tf) -> list:
    """TensorFlow's GPUs. Listing them first asks NVIDIA's driver; where nothing suggests a GPU,
    its failure line (see tflog.NO_GPU_NOISE) stays off the terminal."""
    if gpu_hints() or os.environ.get("TF_CPP_MIN_LOG_LEVEL", "").strip() == "0":
        return tf.config.list_physical_devices("GPU")
    with tflog.filtered_stderr(extra=(tflog.NO_GPU_NOISE,)):
        return tf.config.list_physical_devices("GPU")


def probe_jax(cluster: Cluster) -> dict:
    """JAX's devices. In a multi-process JAX job this first joins the job (all processes' devices
    are then visible), which must happen before JAX touches any device."""
    import jax

    if cluster.kind == "keras":
        keras = use_keras_backend("jax")
        # JAX's CPU backend has no cross-process collectives unless gloo is chosen.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        keras.distribution.initialize()
    devices = jax.devices()
    cc = getattr(devices[0], "compute_capability", None)
    try:  # an accelerator's memory (bytes_limit: what JAX's allocator may use); None on CPUs
        memory = (devices[0].memory_stats() or {}).get("bytes_limit", 0)
    except Exception:  # noqa: BLE001 - a platform without memory stats: unknown
        memory = 0
    return {"jax_platform": devices[0].platform, "jax_devices": len(devices),
            "device_name": devices[0].device_kind if devices[0].platform != "cpu" else None,
            "device_memory": int(memory or 0),
            "jax_processes": jax.process_count(), "jax_process_id": jax.process_index(),
            "jax_compute_capability": tuple(int(x) for x in cc.split(".")) if cc else None}


def use_keras_backend(backend: str):
    """Keras on the chosen backend. If Keras was already imported on another one (by the
    TensorFlow probe, or by a notebook), it is reloaded: safe only while no Keras object exists,
    which holds when detect() runs first, as documented."""
    os.environ["KERAS_BACKEND"] = backend
    import keras

    if keras.backend.backend() != backend:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "set_backend is dangerous": see above
            keras.config.set_backend(backend)
        import keras
    if keras.backend.backend() != backend:
        raise UserError(f"Keras is on the {keras.backend.backend()} backend and could not be "
                        f"switched; set KERAS_BACKEND={backend} before starting Python")
    return keras


def worker_scratch(run_id: str, process_id: int) -> Path:
    """A worker's own folder for what only the chief keeps in the run directory (its backups,
    its copy of the model): `<tempdir>/corolla-<run_id>/worker-<process_id>`, named after the
    run so that a resumed worker finds its backup again. The temp folder is shared with other
    users, who could pre-create that predictable path or plant a symlink there: every folder
    is made private (0o700), and one found already there is used only if it is a real directory
    of this user that nobody else can read."""
    if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
        raise ValueError(f"run_id must be 1 to 32 lowercase hex digits, got {run_id!r}")
    if isinstance(process_id, bool) or not isinstance(process_id, int) or process_id < 0:
        raise ValueError(f"process_id must be an int >= 0, got {process_id!r}")
    path = Path(tempfile.gettempdir())
    for name in (f"corolla-{run_id}", f"worker-{process_id}"):
        path = path / name
        try:
            os.mkdir(path, 0o700)
            os.chmod(path, 0o700)  # ours now (and in a sticky or private parent): undo the umask
        except FileExistsError:
            pass
        _check_private_dir(path)
    return path


_RUN_ID = re.compile(r"[0-9a-f]{1,32}")


def _check_private_dir(path: Path) -> None:
    """Refuses a folder that another user made or can reach (lstat: a symlink is not followed)."""
    st = os.lstat(path)
    uid = os.getuid()
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symlink"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a directory"
    elif st.st_uid != uid:
        problem = f"is owned by uid {st.st_uid}, not by you (uid {uid})"
    elif st.st_mode & 0o077:
        problem = f"is accessible by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    else:
        return
    raise UserError(f"worker scratch folder {path} {problem}; remove it, or set TMPDIR to a "
                    f"folder of your own")


# XLA's flag for deterministic GPU kernels (scatter, reductions, cuDNN's algorithm choice);
# JAX has no API for it. TensorFlow's own (`enable_op_determinism`) is set in training.
DETERMINISTIC_XLA_FLAG = "--xla_gpu_deterministic_ops=true"


def deterministic_xla() -> None:
    """Adds the flag to XLA_FLAGS (kept once, beside the user's own): it must be there before
    JAX initialises its backend, so `detect` calls this before any probe. Harmless on CPU and
    TPU, whose XLA ignores GPU flags."""
    flags = os.environ.get("XLA_FLAGS", "").split()
    if DETERMINISTIC_XLA_FLAG not in flags:
        os.environ["XLA_FLAGS"] = " ".join([*flags, DETERMINISTIC_XLA_FLAG])

"""The runtime's decision table, with the machine faked at the probe boundary."""

import json
import os
import stat

import pytest

from corolla.errors import UserError
from corolla.runtime import Cluster, Hardware, Plan, decide, global_batch
from corolla.runtime import hardware, plan
from corolla.runtime.decide import JAX_STRATEGIES, TF_STRATEGIES

CPU = Hardware(tensorflow=True, jax=True)
# TPUs as the probes report them: JAX is asked first where a TPU may be, and TensorFlow connects
# only when JAX cannot use it (a CPU-only jax), is not installed, or --backend tensorflow.
TPU_VM = Hardware(tpu="vm", tpu_cores=8, jax=True, jax_platform="cpu", jax_devices=1)
TPU_NODE = Hardware(tpu="node", tpu_cores=8, jax=False)
TPU_JAX = Hardware(jax=True, jax_platform="tpu", jax_devices=8, accelerator_hint=True)
TPU_BOTH = Hardware(tpu="vm", tpu_cores=8, jax=True, jax_platform="tpu", jax_devices=8)
GPUS_4 = Hardware(gpus=4, gpu_compute_capability=(8, 0), jax=True)
GPU_1_OLD = Hardware(gpus=1, gpu_compute_capability=(6, 0), jax=True)
GPU_T4 = Hardware(gpus=1, gpu_compute_capability=(7, 5), jax=True)
GPU_JAX_ONLY = Hardware(jax=True, jax_platform="gpu", jax_devices=2,
                        jax_compute_capability=(9, 0))
CPU_SPLIT = Hardware(cpus=4, jax=True)
WORKERS_2 = Cluster(kind="tf_config", num_processes=2, process_id=1, is_chief=False)
JAX_PROCS_2 = Cluster(kind="keras", num_processes=2, process_id=0)


@pytest.mark.parametrize("hw, cluster, expected", [
    (TPU_VM, Cluster(), ("tensorflow", "tpu", "tpu", "mixed_bfloat16")),
    (TPU_NODE, Cluster(), ("tensorflow", "tpu", "tpu", "mixed_bfloat16")),
    (TPU_JAX, Cluster(), ("jax", "tpu", "data_parallel", "mixed_bfloat16")),
    (TPU_BOTH, Cluster(), ("jax", "tpu", "data_parallel", "mixed_bfloat16")),
    # bfloat16 from compute capability 8.0 (A100, L4, H100): no loss scaling; float16 on the
    # older tensor cores (T4, V100); float32 before them.
    (GPUS_4, Cluster(), ("tensorflow", "gpu", "mirrored", "mixed_bfloat16")),
    (GPU_T4, Cluster(), ("tensorflow", "gpu", "one_device", "mixed_float16")),
    (GPU_1_OLD, Cluster(), ("tensorflow", "gpu", "one_device", "float32")),
    (GPU_JAX_ONLY, Cluster(), ("jax", "gpu", "data_parallel", "mixed_bfloat16")),
    (CPU, Cluster(), ("tensorflow", "cpu", "default", "float32")),
    (CPU_SPLIT, Cluster(), ("tensorflow", "cpu", "mirrored", "float32")),
    (CPU, WORKERS_2, ("tensorflow", "cpu", "multiworker", "float32")),
    (GPUS_4, WORKERS_2, ("tensorflow", "gpu", "multiworker", "mixed_bfloat16")),
    (Hardware(jax=True, jax_platform="cpu", jax_devices=1), JAX_PROCS_2,
     ("jax", "cpu", "data_parallel", "float32")),
])
def test_auto_decision_table(hw, cluster, expected):
    d = decide(hw, cluster)
    assert (d.backend, d.accelerator, d.strategy, d.precision) == expected


def test_a_tpu_runs_on_jax_unless_tensorflow_is_asked_for():
    """Keras 3 + TPUStrategy fails on current TPU VM images (keras-team/keras#19448)."""
    assert decide(TPU_BOTH, Cluster()).backend == "jax"
    for asked in ({"backend": "tensorflow"}, {"env_backend": "tensorflow"}):
        d = decide(TPU_BOTH, Cluster(), **asked)
        assert (d.backend, d.strategy) == ("tensorflow", "tpu")


def test_keras_backend_env_and_explicit_choices_win_over_auto():
    assert decide(CPU, Cluster(), env_backend="jax").backend == "jax"
    assert decide(CPU, Cluster(), backend="tensorflow", env_backend="jax").backend == "tensorflow"
    d = decide(GPUS_4, Cluster(), strategy="one_device", precision="float32")
    assert (d.strategy, d.precision) == ("one_device", "float32")


def test_xla_and_steps_per_execution_can_be_forced_anywhere():
    """runtime.jit_compile / steps_per_execution: an accelerator's settings on a CPU (and back);
    auto keeps the table's choice."""
    auto = decide(CPU, Cluster())
    assert (auto.jit_compile, auto.steps_per_execution) == (False, 1)
    forced = decide(CPU, Cluster(), jit_compile="on", steps_per_execution=8)
    assert (forced.jit_compile, forced.steps_per_execution) == (True, 8)
    # On TPUs several steps per call on TensorFlow (one device loop); Keras' JAX trainer would
    # only loop over them in Python, so JAX keeps 1 unless asked.
    assert decide(TPU_NODE, Cluster()).steps_per_execution == 16
    assert decide(TPU_JAX, Cluster()).steps_per_execution == 1
    assert decide(TPU_JAX, Cluster(), steps_per_execution=4).steps_per_execution == 4
    assert not decide(GPU_T4, Cluster(), jit_compile="off").jit_compile


def test_deterministic_tensorflow_keeps_xla_off():
    """Keras turns XLA off under TensorFlow's op determinism, with only a warning: the plan
    says so, and asking for both is a one-line error. JAX keeps XLA (its GPU kernels are made
    deterministic by XLA_FLAGS: see test_deterministic_sets_the_xla_gpu_flag_once)."""
    assert decide(GPU_T4, Cluster()).jit_compile
    assert not decide(GPU_T4, Cluster(), deterministic=True).jit_compile
    assert decide(GPU_JAX_ONLY, Cluster(), deterministic=True).jit_compile


def test_deterministic_sets_the_xla_gpu_flag_once(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/x")
    hardware.deterministic_xla()
    hardware.deterministic_xla()
    assert os.environ["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_gpu_deterministic_ops=true"


@pytest.mark.parametrize("hw, cluster, kwargs, message", [
    (CPU, Cluster(), {"strategy": "tpu"}, "found no TPU"),
    (CPU, Cluster(), {"strategy": "multiworker"}, "needs TF_CONFIG"),
    (CPU, Cluster(), {"strategy": "data_parallel"}, "is a JAX distribution"),
    (CPU, Cluster(), {"backend": "jax", "strategy": "mirrored"}, "is a TensorFlow strategy"),
    (TPU_JAX, Cluster(), {"strategy": "tpu"}, "or pass --backend tensorflow"),
    (Hardware(jax=False), Cluster(), {"backend": "jax"}, r"pip install 'corolla\[jax\]'"),
    (Hardware(tensorflow=False, jax=True), Cluster(), {"backend": "tensorflow"},
     r'pip install "corolla\[tensorflow\]"'),
    (CPU, WORKERS_2, {"backend": "jax"}, "TF_CONFIG configures TensorFlow workers"),
    (CPU, JAX_PROCS_2, {"backend": "tensorflow"}, "KERAS_DISTRIBUTION_"),
    (CPU, Cluster(), {"env_backend": "torch"}, "backend must be auto, tensorflow or jax"),
    (GPU_T4, Cluster(), {"jit_compile": "on", "deterministic": True},
     "--jit-compile on cannot be deterministic on TensorFlow"),
    (TPU_JAX, Cluster(), {"jit_compile": "off"}, "--jit-compile off is not possible on JAX"),
])
def test_impossible_requests_are_user_errors(hw, cluster, kwargs, message):
    with pytest.raises(UserError, match=message):
        decide(hw, cluster, **kwargs)


# A machine on which every strategy could run, so that only the cluster can refuse one.
EVERYTHING = Hardware(tpu="vm", tpu_cores=8, gpus=2, jax=True, jax_platform="cpu", jax_devices=2)
SERVES = {("tf_config", "tensorflow"): "multiworker", ("keras", "jax"): "data_parallel"}


@pytest.mark.parametrize("strategy", sorted(set(TF_STRATEGIES + JAX_STRATEGIES)))
@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
@pytest.mark.parametrize("cluster", [WORKERS_2, JAX_PROCS_2], ids=["tf_config", "keras"])
def test_a_cluster_takes_only_the_strategy_that_keeps_its_processes_in_step(cluster, backend,
                                                                            strategy):
    serving = SERVES.get((cluster.kind, backend))
    if strategy == serving:
        assert decide(EVERYTHING, cluster, backend=backend, strategy=strategy).strategy == strategy
        return
    with pytest.raises(UserError) as refused:
        decide(EVERYTHING, cluster, backend=backend, strategy=strategy)
    message = str(refused.value)
    assert "\n" not in message
    if serving is None:  # the cluster is for the other backend
        assert "configures" in message
    else:
        assert message.startswith(f"--strategy {strategy} cannot span")
        assert message.endswith(f"use --strategy {serving} or auto")


@pytest.mark.parametrize("cluster, backend", [(WORKERS_2, "tensorflow"), (JAX_PROCS_2, "jax")])
def test_auto_serves_a_cluster(cluster, backend):
    d = decide(Hardware(jax=True, jax_platform="cpu", jax_devices=2), cluster, backend=backend)
    assert d.strategy == SERVES[(cluster.kind, backend)]


def test_a_one_worker_tf_config_is_no_cluster_to_refuse_for():
    one = Cluster(kind="tf_config", num_processes=1)
    assert decide(CPU, one, strategy="default").strategy == "default"


@pytest.mark.parametrize("hw, kwargs, jit", [
    (TPU_JAX, {}, True),  # JAX always compiles
    (CPU, {"backend": "jax"}, True),
    (TPU_VM, {"backend": "tensorflow"}, True),  # a TPU runs XLA programs only
    (GPU_1_OLD, {}, True),  # one_device
    (GPU_1_OLD, {"strategy": "default"}, True),
    (GPUS_4, {"strategy": "one_device"}, True),
    (Hardware(gpus=1), {"strategy": "mirrored"}, True),  # one replica
    (GPUS_4, {}, False),  # multi-replica MirroredStrategy: fails in Keras 3.15
    (CPU, {}, False),  # XLA about 5.5x slower on this CPU
    (CPU_SPLIT, {}, False),
])
def test_jit_compile_is_decided_per_accelerator_and_strategy(hw, kwargs, jit):
    assert decide(hw, Cluster(), **kwargs).jit_compile is jit


@pytest.mark.parametrize("hw", [GPUS_4, CPU])
def test_no_xla_under_multiworker(hw):
    d = decide(hw, WORKERS_2)
    assert (d.strategy, d.jit_compile) == ("multiworker", False)


def _plan(hw: Hardware, accelerator: str, steps_per_execution: int) -> Plan:
    return Plan(backend="jax", accelerator=accelerator, strategy_name="DataParallel", devices=8,
                replicas=8, num_processes=1, process_id=0, is_chief=True, batch_per_replica=16,
                global_batch=128, precision="mixed_bfloat16",
                steps_per_execution=steps_per_execution, jit_compile=True, hardware=hw)


@pytest.mark.parametrize("steps, expected", [
    (99, (96, 16)),  # Keras would run 7 x 16 = 112
    (96, (96, 16)),
    (16, (16, 16)),
    (17, (16, 16)),
    (15, (15, 15)),  # shorter than one execution: one execution of its own length
    (1, (1, 1)),
])
def test_a_tpu_epoch_is_whole_executions(steps, expected):
    tpu = _plan(TPU_JAX, "tpu", 16)
    assert tpu.fit_steps(steps) == expected
    epoch, per_execution = tpu.fit_steps(steps)
    assert epoch % per_execution == 0 and epoch <= steps


@pytest.mark.parametrize("steps", [1, 7, 99])
def test_a_cpu_epoch_is_unchanged(steps):
    assert _plan(CPU, "cpu", 1).fit_steps(steps) == (steps, 1)


def test_an_empty_epoch_is_a_bug():
    with pytest.raises(ValueError, match="at least 1 step, got 0"):
        _plan(CPU, "cpu", 1).fit_steps(0)


def test_the_plan_records_its_jit_compile():
    assert _plan(TPU_JAX, "tpu", 16).to_dict()["jit_compile"] is True


def test_global_batch_scales_with_replicas_or_must_divide():
    assert global_batch(8, 16) == (16, 128)
    assert global_batch(4, 16, global_batch_size=64) == (16, 64)
    with pytest.raises(UserError, match=r"global batch size \(30\) must be divisible by the "
                                        r"number of replicas \(4\)"):
        global_batch(4, 16, global_batch_size=30)


def test_tf_config_is_parsed_with_the_chief_first():
    env = {"TF_CONFIG": json.dumps({"cluster": {"chief": ["h:1"], "worker": ["h:2", "h:3"]},
                                    "task": {"type": "worker", "index": 1}})}
    c = hardware.read_cluster(env)
    assert (c.kind, c.num_processes, c.process_id, c.is_chief) == ("tf_config", 3, 2, False)
    env = {"TF_CONFIG": json.dumps({"cluster": {"worker": ["h:1", "h:2"]},
                                    "task": {"type": "worker", "index": 0}})}
    assert hardware.read_cluster(env).is_chief
    assert hardware.read_cluster({}) == Cluster()


@pytest.mark.parametrize("text, message", [
    ("{not json", "TF_CONFIG is not valid JSON"),
    ('{"cluster": {"worker": ["h:1"]}}', "needs a 'cluster' and a 'task'"),
    ('{"cluster": {"ps": ["h:1"]}, "task": {"type": "ps", "index": 0}}', "must list 'worker'"),
    ('{"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 3}}',
     "does not name one of"),
])
def test_malformed_tf_config_is_a_user_error(text, message):
    with pytest.raises(UserError, match=message):
        hardware.read_cluster({"TF_CONFIG": text})


def test_keras_distribution_env_is_parsed():
    env = {"KERAS_DISTRIBUTION_JOB_ADDRESSES": "127.0.0.1:1,127.0.0.1:2",
           "KERAS_DISTRIBUTION_NUM_PROCESSES": "2", "KERAS_DISTRIBUTION_PROCESS_ID": "1"}
    c = hardware.read_cluster(env)
    assert (c.kind, c.num_processes, c.process_id, c.is_chief) == ("keras", 2, 1, False)
    with pytest.raises(UserError, match="must be in \\[0, 2\\), got 5"):
        hardware.read_cluster({**env, "KERAS_DISTRIBUTION_PROCESS_ID": "5"})


class _FakeResolver:
    """Stands in for TPUClusterResolver: `connect` succeeds only for the accepted names."""

    def __init__(self, accepts, error):
        self.accepts, self.error, self.tried = accepts, error, []

    def connect(self, tpu=None):
        self.tried.append(tpu)
        if tpu not in self.accepts:
            raise self.error
        return f"resolver:{tpu}"


def test_tpu_vm_is_found_with_local():
    fake = _FakeResolver(accepts={"local"}, error=ValueError("Please provide a TPU Name"))
    assert hardware.find_tpu(fake) == ("resolver:local", "vm")


def test_tpu_node_is_found_through_the_default_resolver():
    import tensorflow as tf

    fake = _FakeResolver(accepts={None}, error=tf.errors.NotFoundError(None, None, "no local"))
    assert hardware.find_tpu(fake) == ("resolver:None", "node")
    assert fake.tried == ["local", None]


def test_no_tpu_falls_back_quietly():
    import tensorflow as tf

    fake = _FakeResolver(accepts=set(), error=tf.errors.InvalidArgumentError(None, None, "x"))
    assert hardware.find_tpu(fake) == (None, None)


def test_probe_asks_for_a_tpu_only_where_one_may_be(monkeypatch):
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.setattr(hardware, "_TPU_DEVICE_FILES", ())
    monkeypatch.setattr(hardware, "find_tpu", lambda: pytest.fail("TPU probed without a hint"))
    assert "tpu" not in hardware.probe_tensorflow(Cluster())
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    monkeypatch.setattr(hardware, "find_tpu", lambda: (None, None))
    assert "tpu" not in hardware.probe_tensorflow(Cluster())


def _fake_machine(monkeypatch, *, jax_sees: str, tpu_hint: bool = True, gpu_hint=False):
    """A machine with both frameworks installed, faked at the probe boundary; returns the list
    of probes run, in order."""
    ran = []

    def probe_jax(cluster):
        ran.append("jax")
        return {"jax_platform": jax_sees, "jax_devices": 8 if jax_sees == "tpu" else 1}

    def probe_tensorflow(cluster):
        ran.append("tensorflow")
        return {"tpu": "vm", "tpu_cores": 8} if tpu_hint else {}

    # probe() writes KERAS_BACKEND: setenv (unlike delenv of an unset variable) restores it.
    monkeypatch.setenv("KERAS_BACKEND", "")
    monkeypatch.setattr(hardware, "read_cluster", lambda: Cluster())
    monkeypatch.setattr(hardware, "installed", lambda package: True)
    monkeypatch.setattr(hardware, "tpu_hint", lambda: tpu_hint)
    monkeypatch.setattr(hardware, "accelerator_hint", lambda: tpu_hint or gpu_hint)
    monkeypatch.setattr(hardware, "probe_jax", probe_jax)
    monkeypatch.setattr(hardware, "probe_tensorflow", probe_tensorflow)
    return ran


def test_a_tpu_that_jax_sees_is_never_connected_to_tensorflow(monkeypatch):
    ran = _fake_machine(monkeypatch, jax_sees="tpu")
    hw, cluster, env = plan.probe("auto")
    assert ran == ["jax"]
    assert (hw.jax_platform, hw.tpu) == ("tpu", None)
    assert os.environ["KERAS_BACKEND"] == "jax"
    assert decide(hw, cluster, env_backend=env).backend == "jax"


def test_a_tpu_jax_cannot_use_goes_to_tensorflow(monkeypatch):
    ran = _fake_machine(monkeypatch, jax_sees="cpu")
    hw, cluster, env = plan.probe("auto")
    assert ran == ["jax", "tensorflow"]
    d = decide(hw, cluster, env_backend=env)
    assert (d.backend, d.strategy) == ("tensorflow", "tpu")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_tensorflow_asked_for_gets_the_tpu_without_asking_jax(monkeypatch, how):
    ran = _fake_machine(monkeypatch, jax_sees="tpu")
    if how == "env":
        monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    hw, cluster, env = plan.probe("tensorflow" if how == "flag" else "auto")
    assert ran == ["tensorflow"]
    d = decide(hw, cluster, backend="tensorflow" if how == "flag" else "auto", env_backend=env)
    assert (d.backend, d.strategy) == ("tensorflow", "tpu")


def test_gpus_are_still_asked_of_tensorflow_first(monkeypatch):
    ran = _fake_machine(monkeypatch, jax_sees="gpu", tpu_hint=False, gpu_hint=True)
    hw, cluster, env = plan.probe("auto")
    assert ran == ["tensorflow", "jax"]  # JAX only because TensorFlow saw no GPU
    assert decide(hw, cluster, env_backend=env).backend == "jax"


@pytest.fixture
def temp_dir(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_worker_scratch_is_made_private(temp_dir):
    old = os.umask(0o022)  # the usual one: folders would be 0o755
    try:
        path = hardware.worker_scratch("3fa9c2", 1)
    finally:
        os.umask(old)
    assert path == temp_dir / "corolla-3fa9c2" / "worker-1"
    for folder in (path.parent, path):
        assert stat.S_IMODE(os.lstat(folder).st_mode) == 0o700
    assert hardware.worker_scratch("3fa9c2", 1) == path  # a resumed worker finds it again


def test_a_planted_symlink_is_refused(temp_dir):
    target = temp_dir / "elsewhere"
    target.mkdir(mode=0o700)
    (temp_dir / "corolla-3fa9c2").symlink_to(target)
    with pytest.raises(UserError, match=r"corolla-3fa9c2 is a symlink; remove it"):
        hardware.worker_scratch("3fa9c2", 0)
    assert not (target / "worker-0").exists()


def test_a_folder_others_can_reach_is_refused(temp_dir):
    folder = temp_dir / "corolla-3fa9c2"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UserError, match=r"corolla-3fa9c2 is accessible by group or others "
                                        r"\(mode 777\)"):
        hardware.worker_scratch("3fa9c2", 0)


def test_a_folder_of_another_user_is_refused(temp_dir, monkeypatch):
    (temp_dir / "corolla-3fa9c2").mkdir(mode=0o700)
    me = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: me + 1)
    with pytest.raises(UserError, match=rf"corolla-3fa9c2 is owned by uid {me}, not by you"):
        hardware.worker_scratch("3fa9c2", 0)


def test_a_worker_folder_that_is_a_file_is_refused(temp_dir):
    (temp_dir / "corolla-3fa9c2").mkdir(mode=0o700)
    (temp_dir / "corolla-3fa9c2" / "worker-0").write_text("")
    with pytest.raises(UserError, match="worker-0 is not a directory"):
        hardware.worker_scratch("3fa9c2", 0)


@pytest.mark.parametrize("run_id", ["", "../etc", "my-run", "ABC", "3fa9c2/..", "0" * 33, None])
def test_a_run_id_must_be_short_hex(temp_dir, run_id):
    with pytest.raises(ValueError, match="run_id must be 1 to 32 lowercase hex digits"):
        hardware.worker_scratch(run_id, 0)
    assert list(temp_dir.iterdir()) == []


def test_auto_on_a_tpu_host_in_a_tf_config_cluster_is_refused():
    with pytest.raises(UserError, match="TPUStrategy cannot span them"):
        decide(Hardware(tpu="vm", tpu_cores=8), WORKERS_2)


def test_processes_that_jax_joined_make_the_cluster():
    """A TPU pod slice's hosts (or processes that called jax.distributed.initialize) with no
    KERAS_DISTRIBUTION_*: the cluster is JAX's count, and only process 0 is the chief; a count
    that disagrees with KERAS_DISTRIBUTION_NUM_PROCESSES is refused; TensorFlow workers are
    left as TF_CONFIG says."""
    pod = hardware.joined(Cluster(), processes=4, process_id=2)
    assert (pod.kind, pod.num_processes, pod.process_id, pod.is_chief) == ("keras", 4, 2, False)
    assert hardware.joined(Cluster(), processes=4, process_id=0).is_chief
    assert hardware.joined(Cluster(), processes=1, process_id=0) == Cluster()
    keras_job = Cluster(kind="keras", num_processes=2, process_id=1, is_chief=False)
    assert hardware.joined(keras_job, 2, 1) is keras_job
    with pytest.raises(UserError, match="says 2 processes but JAX joined 4"):
        hardware.joined(keras_job, 4, 1)
    tf_job = Cluster(kind="tf_config", num_processes=2, process_id=1, is_chief=False)
    assert hardware.joined(tf_job, 1, 0) is tf_job


def test_every_gpu_and_tpu_hint_is_found(tmp_path):
    """A container given GPU 3 has only /dev/nvidia3 (and nvidiactl, which is no GPU); TPU v5e
    VMs show /dev/vfio/N, older ones /dev/accelN."""
    (tmp_path / "vfio").mkdir()
    for name in ("nvidia3", "nvidiactl", "nvidia-uvm", "accel0", "vfio/0", "vfio/vfio"):
        (tmp_path / name).touch()
    assert hardware.gpu_hints({}, str(tmp_path)) == [str(tmp_path / "nvidia3")]
    assert hardware.gpu_hints({"CUDA_VISIBLE_DEVICES": "3"}, "/nonexistent") == \
        ["CUDA_VISIBLE_DEVICES=3"]
    for hidden in ("", "-1"):  # every GPU hidden on purpose (as the tests do): no hint at all
        assert hardware.gpu_hints({"CUDA_VISIBLE_DEVICES": hidden}, str(tmp_path)) == []
    assert hardware.tpu_hints({"TPU_NAME": "t1"}, str(tmp_path)) == \
        ["TPU_NAME=t1", str(tmp_path / "accel0"), str(tmp_path / "vfio" / "0")]


def test_a_hinted_gpu_no_framework_sees_is_one_line_with_the_libraries_reasons(monkeypatch):
    monkeypatch.setattr(hardware, "gpu_hints", lambda: ["/dev/nvidia3"])
    monkeypatch.setattr(hardware, "tpu_hints", list)
    line = hardware.unused_accelerator(Hardware(tensorflow=False, jax=False), "cpu")
    assert line == ("/dev/nvidia3 suggests a GPU, but neither TensorFlow nor JAX can use one "
                    "(TensorFlow: not installed; JAX: not installed); running on the CPU")
    # This machine's libraries, asked for real: TensorFlow's build or NVIDIA's driver, and
    # JAX's own error.
    line = hardware.unused_accelerator(Hardware(tensorflow=True, jax=True), "cpu")
    assert line.startswith("/dev/nvidia3 suggests a GPU, but neither TensorFlow nor JAX can "
                           "use one (TensorFlow 2.") and "; JAX 0." in line
    assert "\n" not in line
    assert hardware.unused_accelerator(Hardware(gpus=1), "gpu") is None
    monkeypatch.setattr(hardware, "gpu_hints", list)
    assert hardware.unused_accelerator(Hardware(), "cpu") is None

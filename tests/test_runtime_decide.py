"""The runtime's decision table, with the machine faked at the probe boundary."""

import json

import pytest

from corolla.errors import UserError
from corolla.runtime import Cluster, Hardware, decide, global_batch
from corolla.runtime import hardware

CPU = Hardware(tensorflow=True, jax=True)
TPU_VM = Hardware(tpu="vm", tpu_cores=8, jax=True)
TPU_NODE = Hardware(tpu="node", tpu_cores=8, jax=True)
TPU_JAX_ONLY = Hardware(jax=True, jax_platform="tpu", jax_devices=8, accelerator_hint=True)
GPUS_4 = Hardware(gpus=4, gpu_compute_capability=(8, 0), jax=True)
GPU_1_OLD = Hardware(gpus=1, gpu_compute_capability=(6, 0), jax=True)
GPU_JAX_ONLY = Hardware(jax=True, jax_platform="gpu", jax_devices=2,
                        jax_compute_capability=(9, 0))
CPU_SPLIT = Hardware(cpus=4, jax=True)
WORKERS_2 = Cluster(kind="tf_config", num_processes=2, process_id=1, is_chief=False)
JAX_PROCS_2 = Cluster(kind="keras", num_processes=2, process_id=0)


@pytest.mark.parametrize("hw, cluster, expected", [
    (TPU_VM, Cluster(), ("tensorflow", "tpu", "tpu", "mixed_bfloat16")),
    (TPU_NODE, Cluster(), ("tensorflow", "tpu", "tpu", "mixed_bfloat16")),
    (TPU_JAX_ONLY, Cluster(), ("jax", "tpu", "data_parallel", "mixed_bfloat16")),
    (GPUS_4, Cluster(), ("tensorflow", "gpu", "mirrored", "mixed_float16")),
    (GPU_1_OLD, Cluster(), ("tensorflow", "gpu", "one_device", "float32")),
    (GPU_JAX_ONLY, Cluster(), ("jax", "gpu", "data_parallel", "mixed_float16")),
    (CPU, Cluster(), ("tensorflow", "cpu", "default", "float32")),
    (CPU_SPLIT, Cluster(), ("tensorflow", "cpu", "mirrored", "float32")),
    (CPU, WORKERS_2, ("tensorflow", "cpu", "multiworker", "float32")),
    (GPUS_4, WORKERS_2, ("tensorflow", "gpu", "multiworker", "mixed_float16")),
    (Hardware(jax=True, jax_platform="cpu", jax_devices=1), JAX_PROCS_2,
     ("jax", "cpu", "data_parallel", "float32")),
])
def test_auto_decision_table(hw, cluster, expected):
    d = decide(hw, cluster)
    assert (d.backend, d.accelerator, d.strategy, d.precision) == expected


def test_keras_backend_env_and_explicit_choices_win_over_auto():
    assert decide(CPU, Cluster(), env_backend="jax").backend == "jax"
    assert decide(CPU, Cluster(), backend="tensorflow", env_backend="jax").backend == "tensorflow"
    d = decide(GPUS_4, Cluster(), strategy="one_device", precision="float32")
    assert (d.strategy, d.precision) == ("one_device", "float32")


@pytest.mark.parametrize("hw, cluster, kwargs, message", [
    (CPU, Cluster(), {"strategy": "tpu"}, "found no TPU"),
    (CPU, Cluster(), {"strategy": "multiworker"}, "needs TF_CONFIG"),
    (CPU, Cluster(), {"strategy": "data_parallel"}, "is a JAX distribution"),
    (CPU, Cluster(), {"backend": "jax", "strategy": "mirrored"}, "is a TensorFlow strategy"),
    (Hardware(jax=False), Cluster(), {"backend": "jax"}, r"pip install 'corolla\[jax\]'"),
    (Hardware(tensorflow=False, jax=True), Cluster(), {"backend": "tensorflow"},
     "pip install tensorflow"),
    (CPU, WORKERS_2, {"backend": "jax"}, "TF_CONFIG configures TensorFlow workers"),
    (CPU, JAX_PROCS_2, {"backend": "tensorflow"}, "KERAS_DISTRIBUTION_"),
    (CPU, Cluster(), {"env_backend": "torch"}, "backend must be auto, tensorflow or jax"),
])
def test_impossible_requests_are_user_errors(hw, cluster, kwargs, message):
    with pytest.raises(UserError, match=message):
        decide(hw, cluster, **kwargs)


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

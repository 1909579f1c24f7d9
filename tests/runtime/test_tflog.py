"""TensorFlow's C++ start-up lines stay off the terminal, and nothing else does: the real
commands in fresh processes (TensorFlow prints at import, once per process), and the filter
itself with lines written to fd 2 as C++ writes them."""

import os
import subprocess
import sys
import textwrap

import pytest

from corolla.runtime import tflog

BANNER = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
CUDA = (b"I0000 00:00:1795346533.231385    3537 cudart_stub.cc:31] Could not find cuda drivers "
        b"on your machine, GPU will not be used.\n")
REAL = b"W0000 00:00:1795346533.300000    3537 some_op.cc:12] something the user must see\n"
TF_LINE = ("absl::", "cuda", "cuinit", "onednn", "cpu_feature_guard", "i0000", "e0000", "w0000")


def corolla(*args, level=None, **kwargs):
    """`python -m corolla ARGS` with TF_CPP_MIN_LOG_LEVEL as a user would have it (conftest
    sets it for the test process)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    return subprocess.run([sys.executable, "-m", "corolla", *args], env=env,
                          capture_output=True, text=True, timeout=300, **kwargs)


def tensorflow_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(w in line.lower() for w in TF_LINE)]


@pytest.mark.slow
def test_info_prints_only_corollas_lines():
    result = corolla("info")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "hardware", "device", "backend", "strategy", "REPLICAS", "processes", "batch",
        "precision", "jit_compile", "steps/call"]


@pytest.mark.slow
def test_notebooks_level_2_shows_no_start_up_lines_even_before_an_error(tmp_path):
    """TF_CPP_MIN_LOG_LEVEL=2 (common in notebooks): TensorFlow's start-up lines ignore it,
    and on a machine without a GPU so does cuInit's E-level failure: none of them shows."""
    result = corolla("train", "--data", str(tmp_path / "nonexistent"), level="2")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("corolla: error: data")


@pytest.mark.slow
def test_the_python_api_in_a_fresh_interpreter_prints_no_tensorflow_lines(tmp_path):
    """corolla.train() quiets TensorFlow as the command does (TensorFlow not yet imported, no
    level set by the user): before, 11 lines, among them an E-level cuInit failure."""
    code = ("import corolla\n"
            "try:\n"
            f"    corolla.train(data={str(tmp_path / 'nonexistent')!r}, log=lambda *a: None)\n"
            "except corolla.errors.UserError as e:\n"
            "    print('USER ERROR', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert "USER ERROR data path" in result.stdout, result.stderr
    assert tensorflow_lines(result.stderr) == [], result.stderr


@pytest.mark.slow
def test_a_runs_methods_in_a_fresh_interpreter_print_no_tensorflow_lines(tiny_run, tmp_path):
    """open_run(...).predict_photos() imports TensorFlow first in this process: before, it
    printed TensorFlow's 9 start-up lines (absl's banner, oneDNN, CUDA) where train() and
    evaluate() printed none."""
    from PIL import Image

    photo = tmp_path / "photo.png"
    Image.new("RGB", (40, 30), (200, 40, 90)).save(photo)
    code = ("import corolla\n"
            f"rows = corolla.open_run({str(tiny_run)!r}).predict_photos({str(photo)!r}, "
            "top_k=2)\n"
            "print('TOP', rows[0]['top'][0]['class'])\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300, check=False, cwd=tmp_path)
    assert "TOP " in result.stdout, result.stderr
    assert tensorflow_lines(result.stderr) == [], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("call", [
    "corolla.runtime.detect().backend",
    "corolla.models.create_model('small_cnn', num_classes=3, image_size=32).name",
], ids=["runtime_detect", "create_model"])
def test_the_lower_level_pieces_in_a_fresh_interpreter_print_no_tensorflow_lines(call):
    """The guide's `corolla.runtime.detect()` (and a model built before it) import TensorFlow
    first in this process: before, they printed its start-up lines (absl's banner, CUDA, the
    CPU-feature notice) where the notebook API printed none."""
    code = f"import corolla\nprint('DONE', {call})\n"
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0 and "DONE " in result.stdout, result.stderr
    assert tensorflow_lines(result.stderr) == [], result.stderr


def test_a_quiet_call_inside_a_command_filters_the_import_once(monkeypatch):
    """`tflog.quiet` inside the CLI's or the notebook API's block adds no second filter (and
    no second helper process) around the same import."""
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)  # as a fresh process has it
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    before = list(sys.meta_path)
    with tflog.quiet_tensorflow_import():
        outer = [f for f in sys.meta_path if f not in before]
        assert len(outer) == 1
        with tflog.quiet_tensorflow_import():
            assert [f for f in sys.meta_path if f not in before] == outer
    assert sys.meta_path == before


@pytest.mark.slow
def test_a_user_error_after_tensorflow_loaded_is_one_line(tmp_path):
    result = corolla("train", "--data", str(tmp_path / "nonexistent"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("corolla: error: data")


@pytest.mark.slow
def test_a_log_level_set_by_the_user_keeps_tensorflows_lines():
    result = corolla("info", "--json", level="0")
    assert result.returncode == 0, result.stderr
    assert tensorflow_lines(result.stderr), result.stderr


def test_noise_is_dropped_and_other_lines_replayed(capfd):
    with tflog.filtered_stderr():
        os.write(2, BANNER + CUDA + REAL + b"no newline at the end")
        os.write(1, b"stdout is not held back\n")
        assert capfd.readouterr() == ("stdout is not held back\n", "")
    assert capfd.readouterr().err == REAL.decode() + "no newline at the end"


def test_everything_is_replayed_when_the_block_raises(capfd):
    with pytest.raises(ImportError), tflog.filtered_stderr():
        os.write(2, BANNER + CUDA + REAL)
        raise ImportError("libsomething.so: cannot open shared object file")
    assert capfd.readouterr().err == (BANNER + CUDA + REAL).decode()
    os.write(2, b"fd 2 is back\n")
    assert capfd.readouterr().err == "fd 2 is back\n"


@pytest.fixture
def fake_tensorflow(tmp_path):
    """A `tensorflow` that prints like the real one at import, then does `then`."""
    def make(then: str):
        package = tmp_path / "tensorflow"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text(textwrap.dedent(f"""
            import os
            os.write(2, {BANNER + CUDA!r})
            os.write(2, {REAL!r})
            {then}
        """))
        code = ("from corolla.runtime import tflog\n"
                "with tflog.quiet_tensorflow_import():\n"
                "    import tensorflow\n"
                "print(tensorflow.__loader__.__class__.__name__, tensorflow.__spec__.loader is "
                "tensorflow.__loader__)\n")
        env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              timeout=60)
    return make


def test_the_first_tensorflow_import_is_filtered(fake_tensorflow):
    result = fake_tensorflow("import sys; print('a python warning', file=sys.stderr)")
    assert result.returncode == 0, result.stderr
    assert result.stderr == REAL + b"a python warning\n"
    assert result.stdout == b"SourceFileLoader True\n"  # the module keeps its real loader


def test_a_failing_import_shows_everything_then_the_traceback(fake_tensorflow):
    result = fake_tensorflow("raise ImportError('libcudnn.so.9: cannot open shared object')")
    assert result.returncode == 1
    assert result.stderr.startswith(BANNER + CUDA + REAL)
    assert result.stderr.rstrip().endswith(b"libcudnn.so.9: cannot open shared object")


def test_a_process_that_dies_in_the_import_still_shows_why(fake_tensorflow):
    # As TensorFlow does on a CPU without the instructions it was built for: print, abort.
    result = fake_tensorflow("os.write(2, b'F0000 cpu_feature_guard.cc:1] compiled to use AVX\\n')"
                             "; os.abort()")
    assert result.returncode != 0
    assert result.stderr.startswith(BANNER + CUDA + REAL + b"F0000 cpu_feature_guard.cc")


def test_nothing_is_filtered_when_the_user_set_the_level(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    finders = list(sys.meta_path)
    with tflog.quiet_tensorflow_import():
        assert sys.meta_path == finders


def test_drop_noise_keeps_every_other_byte():
    known = [
        BANNER, CUDA,
        b"2023-10-09 13:36:23.355516: E tensorflow/compiler/xla/stream_executor/cuda/cuda_dnn.cc:"
        b"9342] Unable to register cuDNN factory: Attempting to register factory for plugin "
        b"cuDNN when one has already been registered\n",
        b"W0000 00:00:1744708234.960672 1370911 computation_placer.cc:177] computation placer "
        b"already registered. Please check linkage and avoid linking the same target more than "
        b"once.\r\n",
        # TensorFlow 2.21 (absl's format) and 2.20 and before (TensorFlow's own).
        b"I0000 00:00:1795537248.824541    2252 port.cc:153] oneDNN custom operations are on. "
        b"You may see slightly different numerical results due to floating-point round-off "
        b"errors from different computation orders. To turn them off, set the environment "
        b"variable `TF_ENABLE_ONEDNN_OPTS=0`.\n",
        b"2025-08-14 10:02:11.123456: I tensorflow/core/util/port.cc:153] oneDNN custom "
        b"operations are on. You may see slightly different numerical results.\n",
    ]
    kept = [REAL, b"E0000 cuda_platform.cc:52] failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER"
                  b"_MISMATCH\n", b"Traceback (most recent call last):\n", b"\n", b"tail"]
    assert tflog.drop_noise(b"".join(known[:2] + kept[:2] + known[2:] + kept[2:])) == \
        b"".join(kept)


@pytest.mark.slow
def test_tensorflows_python_info_lines_stay_off_in_an_interactive_shell():
    """Jupyter is an interactive shell (`sys.ps1`), where TensorFlow's Python logger starts at
    INFO on stdout: a notebook's export printed "INFO:tensorflow:Assets written to" twice."""
    code = ("import sys\n"
            "sys.ps1 = '>>> '\n"
            "from corolla.runtime import tflog\n"
            "with tflog.quiet_tensorflow_import():\n"
            "    import tensorflow as tf\n"
            "tf.get_logger().info('an info line')\n"
            "tf.get_logger().warning('a warning line')\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    assert "an info line" not in result.stdout + result.stderr
    assert "WARNING:tensorflow:a warning line" in result.stdout + result.stderr

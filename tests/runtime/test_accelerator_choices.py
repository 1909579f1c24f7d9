"""What `--recipe auto` decides on a GPU or TPU before training: the batch from the card's memory,
the model and the size; float16 never on the cards known to break it; a described machine holds
only hardware fields."""

import pytest

from corolla.runtime import Hardware, plan
from corolla.runtime.decide import choose_batch, choose_precision


GIB = 1 << 30


@pytest.mark.parametrize("memory, size, activations, precision, expected", [
    (80 * GIB, 224, 25.3, "mixed_bfloat16", 256),  # B0 at 224 on an 80 GB card: the cap
    (16 * GIB, 512, 145.0, "mixed_bfloat16", 16),  # B7 at 512 on a TPU v3 core (notebooks)
    (80 * GIB, 512, 145.0, "mixed_bfloat16", 64),
    (16 * GIB, 512, 145.0, "float32", 8),  # 32-bit activations: half as many
    (1 * GIB, 600, 145.0, "float32", 8),  # never below MIN_BATCH
])
def test_the_batch_follows_memory_model_and_size(memory, size, activations, precision, expected):
    assert choose_batch(memory, size, activations, precision) == expected


def test_the_batch_is_the_recipes_when_memory_is_unknown_and_fits_the_data():
    assert choose_batch(0, 224, 25.3, "mixed_bfloat16", fallback=16) == 16
    # 300 training images over 2 replicas: at most 150 each, a power of two.
    assert choose_batch(80 * GIB, 224, 25.3, "mixed_bfloat16", examples=300, replicas=2) == 128
    # Tiny data: one step an epoch, below MIN_BATCH rather than an error.
    assert choose_batch(80 * GIB, 224, 25.3, "mixed_bfloat16", examples=6) == 4


@pytest.mark.parametrize("name, cc, expected", [
    ("NVIDIA GeForce GTX 1660 Ti", (7, 5), "float32"),
    ("Quadro T1000", (7, 5), "float32"),
    ("NVIDIA T600", (7, 5), "float32"),
    ("Tesla T4", (7, 5), "mixed_float16"),
    ("NVIDIA GeForce RTX 2080 Ti", (7, 5), "mixed_float16"),
    ("Tesla V100-SXM2-16GB", (7, 0), "mixed_float16"),
    ("NVIDIA A100-SXM4-80GB", (8, 0), "mixed_bfloat16"),
])
def test_float16_is_not_chosen_on_gpus_known_to_break_it(name, cc, expected):
    for backend, hw in (("tensorflow", Hardware(gpus=1, gpu_compute_capability=cc,
                                                device_name=name)),
                        ("jax", Hardware(jax=True, jax_platform="gpu", jax_devices=1,
                                         jax_compute_capability=cc, device_name=name))):
        assert choose_precision("auto", "gpu", hw, backend) == expected


def test_described_hardware_must_be_hardware_fields():
    with pytest.raises(TypeError, match="gpu_memory"):
        with plan.described(gpu_memory=1):
            pass

"""Writes the procedural "petals" images (`petals`) in exactly the competition
layout, with an unlabelled test split and 9-hex-character ids, so the demo reads them through
the same reader and pipeline as real data."""

from __future__ import annotations

import json
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from corolla.data.classes import CLASSES_FILE, format_classes_file
from corolla.data.synthetic import petals

VERSION = 2  # bump when the drawing changes, so caches are not reused across versions
_DONE = "COMPLETE"


@dataclass(frozen=True)
class PetalsSpec:
    image_size: int = 64
    num_classes: int = 10
    train: int = 2000
    val: int = 500
    test: int = 500
    shards: int = 4
    seed: int = 0

    @property
    def folder_name(self) -> str:
        return (f"petals-v{VERSION}-{self.image_size}px-{self.num_classes}c-"
                f"{self.train}-{self.val}-{self.test}-s{self.seed}")


def _ids(rng: np.random.Generator, n: int, taken: set[str]) -> list[str]:
    ids = []
    while len(ids) < n:
        candidate = f"{int(rng.integers(16 ** 9)):09x}"
        if candidate not in taken:
            taken.add(candidate)
            ids.append(candidate)
    return ids


def write(out_dir: str | Path, spec: PetalsSpec = PetalsSpec()) -> Path:
    """Generates and writes the three splits and classes.txt under `out_dir`."""
    import tensorflow as tf

    from corolla.data import records

    out_dir = Path(out_dir)
    size_dir = out_dir / f"tfrecords-jpeg-{spec.image_size}x{spec.image_size}"
    rng = np.random.default_rng(spec.seed)
    taken: set[str] = set()
    for offset, (split, n) in enumerate((("train", spec.train), ("val", spec.val),
                                         ("test", spec.test))):
        images, labels = petals.generate(n, image_size=spec.image_size,
                                         seed=spec.seed * 1000 + offset,
                                         num_classes=spec.num_classes)
        ids = _ids(rng, n, taken)
        serialized = [
            records.serialize(tf.io.encode_jpeg(image, quality=95).numpy(), example_id,
                              None if split == "test" else int(label))
            for image, label, example_id in zip(images, labels, ids)]
        records.write_shards(serialized, size_dir / split, spec.image_size, spec.shards)
    (out_dir / CLASSES_FILE).write_text(
        format_classes_file(petals.CLASS_NAMES[: spec.num_classes]))
    (out_dir / "spec.json").write_text(json.dumps(asdict(spec), indent=1) + "\n")
    return out_dir


def ensure(cache_dir: str | Path, spec: PetalsSpec = PetalsSpec(), log=print) -> Path:
    """The data set in `cache_dir`, generated on first use. Written to a temporary folder and
    renamed when complete, so an interrupted run never leaves a half data set behind."""
    final = Path(cache_dir) / spec.folder_name
    if (final / _DONE).is_file():
        log(f"synthetic petals: using {final}")
        return final
    log(f"synthetic petals: generating {spec.train}/{spec.val}/{spec.test} images "
        f"({spec.image_size}px, {spec.num_classes} classes) in {final}")
    tmp = final.with_name(f".{final.name}-{uuid.uuid4().hex[:8]}")
    write(tmp, spec)
    (tmp / _DONE).write_text("")
    if final.exists():
        shutil.rmtree(final)  # an incomplete earlier attempt (no COMPLETE marker)
    tmp.rename(final)
    return final

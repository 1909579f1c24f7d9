"""The data check's speed and what it finds, on real photos (`corolla check-data`'s pass):

    python benchmarks/duplicates.py [--data ../shared/data/flowers5] [--picture FILE.png]
                                    [--hashes 400]

Prints images/s of the whole pass (decode + fingerprint + grouping, not cached), the groups of
duplicates found within and across splits, and the time of the grouping alone on the pass's
hashes repeated to the competition's 23,847 images (multi-index hashing, not all-pairs).
`--picture` draws the first groups across splits side by side, to look at them. `--hashes N`
also measures, on N train photos, how far pHash moves under each planted change and how close
distinct photos come (the figures behind `duplicates.THRESHOLD`).
"""

from __future__ import annotations

import argparse
import io
import time
from pathlib import Path

import numpy as np

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "flowers5"
COMPETITION_IMAGES = 23_847


def _picture(result, path: Path, rows: int = 8) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    groups = result.across()[:rows]
    columns = max(len(g.members) for g in groups)
    fig, axes = plt.subplots(len(groups), columns, figsize=(2.2 * columns, 2.3 * len(groups)),
                             squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for r, group in enumerate(groups):
        for c, i in enumerate(group.members[:columns]):
            e = result.entries[i]
            ax = axes[r, c]
            ax.imshow(Image.open(io.BytesIO(_record_image(e.path))).convert("RGB"))
            name = "" if e.label is None else f"\n{result.class_names[e.label].strip()}"
            ax.set_title(f"{e.split}/{e.id}{name}", fontsize=7)
    fig.suptitle("Groups of duplicates across splits (one row each)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    print(f"wrote {path}")


def _record_image(where: str) -> bytes:
    """The image bytes of "FILE.tfrec[k]"."""
    import tensorflow as tf

    file, index = where[:-1].rsplit("[", 1)
    record = next(iter(tf.data.TFRecordDataset(file).skip(int(index)).take(1)))
    return tf.train.Example.FromString(record.numpy()).features.feature["image"] \
        .bytes_list.value[0]


def _hash_robustness(data: Path, n: int) -> None:
    import imagehash
    from PIL import Image, ImageEnhance

    from corolla.data import layout as layout_lib

    layout = layout_lib.open_layout(str(data), min(layout_lib.available_sizes(str(data))))
    images = []
    for path in layout.split("train").paths:
        import tensorflow as tf

        for record in tf.data.TFRecordDataset(path):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            images.append(Image.open(io.BytesIO(feature["image"].bytes_list.value[0]))
                          .convert("RGB"))
            if len(images) == n:
                break
        if len(images) == n:
            break

    def jpeg(im, quality):
        buffer = io.BytesIO()
        im.save(buffer, "JPEG", quality=quality)
        return Image.open(io.BytesIO(buffer.getvalue())).convert("RGB")

    def crop(im, f):
        d = int(im.width * f)
        return im.crop((d, d, im.width - d, im.height - d))

    changes = {
        "resized to 80%": lambda im: im.resize((int(im.width * .8), int(im.height * .8))),
        "JPEG quality 60": lambda im: jpeg(im, 60),
        "brightness +25%": lambda im: ImageEnhance.Brightness(im).enhance(1.25),
        "colour cast": lambda im: Image.fromarray(np.clip(np.asarray(im) * [1.1, .95, .85], 0,
                                                          255).astype(np.uint8)),
        "saturation x1.5": lambda im: ImageEnhance.Color(im).enhance(1.5),
        "crop 3% a side": lambda im: crop(im, .03),
        "crop 5% a side": lambda im: crop(im, .05),
    }
    base = [imagehash.phash(im) for im in images]
    print(f"pHash bits moved by each change ({n} photos): mean / 95th percentile / max")
    for what, change in changes.items():
        d = np.array([imagehash.phash(change(im)) - h for im, h in zip(images, base)])
        print(f"  {what:16s} {d.mean():5.1f} {np.percentile(d, 95):5.0f} {d.max():5d}")
    v = np.array([int(str(h), 16) for h in base], dtype=np.uint64)
    iu = np.triu_indices(len(v), 1)
    d = np.bitwise_count(v[:, None] ^ v[None, :])[iu]
    print(f"  distinct pairs ({len(d)}): min {d.min()}, 0.1% quantile "
          f"{np.percentile(d, 0.1):.0f}, 1% quantile {np.percentile(d, 1):.0f}")


def main() -> None:
    from corolla.data.audit import duplicates, survey

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--picture", help="PNG of the first groups across splits")
    parser.add_argument("--hashes", type=int, default=0, metavar="N")
    args = parser.parse_args()

    result = survey.survey(args.data, log=lambda *a: None)
    summary = result.summary()
    d = summary["duplicates"]
    print(f"{summary['images']} images of {result.read}: {summary['seconds']:.1f} s, "
          f"{summary['images_per_second']:.0f} images/s (decode, fingerprint, group)")
    print(f"groups of duplicates: {d['groups']} ({d['exact_groups']} exact, {d['images']} "
          f"images); within splits: {d['within']}; across splits: {d['across_groups']} "
          f"group(s), images with a copy in another split: {d['across_images']}; groups whose "
          f"labels differ: {d['labels_differ']}")
    hashes = np.array([e.fingerprint.phash for e in result.entries if e.fingerprint],
                      dtype=np.uint64)
    repeats = -(-COMPETITION_IMAGES // len(hashes))
    rng = np.random.default_rng(0)
    # The real hashes, and copies of them with 12 random bits flipped (farther than the
    # threshold from their originals, as distinct photos are): the competition's count.
    flips = [np.bitwise_or.reduce(np.uint64(1) << rng.integers(0, 64, (len(hashes), 12))
                                  .astype(np.uint64), axis=1) for _ in range(repeats - 1)]
    many = np.concatenate([hashes] + [hashes ^ f for f in flips])[:COMPETITION_IMAGES]
    start = time.perf_counter()
    pairs = duplicates.near_pairs(many)
    print(f"grouping {len(many)} hashes (multi-index, {duplicates.THRESHOLD + 1} chunks): "
          f"{time.perf_counter() - start:.2f} s, {len(pairs)} pairs within "
          f"{duplicates.THRESHOLD} bits")
    if args.picture:
        _picture(result, Path(args.picture))
    if args.hashes:
        _hash_robustness(Path(args.data), args.hashes)


if __name__ == "__main__":
    main()

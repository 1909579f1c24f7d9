"""`corolla convert`: an image folder or a CSV of path,label -> sharded TFRecords in the
competition layout."""

from __future__ import annotations

import argparse
from pathlib import Path

from corolla.data.audit import survey
from corolla.data.prepare import convert as convert_lib
from corolla.data.prepare import sources
from corolla.data.prepare.settings import FITS, Settings
from corolla.data.prepare.splits import needs_split
from corolla.errors import UserError


def convert(src: str, out: str, settings: Settings) -> Path:
    """Converts `src` into the new folder `out` (never an existing one)."""
    settings = settings.check()
    if Path(out).exists():  # before the source is listed
        raise UserError(f"{out} already exists; convert never overwrites: remove it or "
                        f"choose another OUT")
    source = sources.scan(src)
    sources.check_classes(source)
    copies = None
    if settings.dedupe or needs_split(source):  # copies are kept in one split
        from corolla.data import datasets  # loads TensorFlow: after the source is checked

        copies = survey.copies(src, datasets.checks_dir(),
                               max_megapixels=settings.max_megapixels)
    convert_lib.convert(source, out, settings, copies=copies)
    return Path(out)


HELP = ("an image folder or a CSV of path,label -> sharded TFRecords in the competition layout "
        "(OUT/tfrecords-jpeg-SxS/...)")


def add_arguments(p) -> None:
    d = Settings()
    p.add_argument("src", metavar="SRC", help="image folder (CLASS/*.jpg, optionally under "
                   "train/ val/ test/; test/ may hold unlabelled files) or a CSV with the "
                   "columns path,label[,split] (paths relative to the CSV's folder); never "
                   "modified")
    p.add_argument("out", metavar="OUT", help="the folder to write (must not exist)")
    p.add_argument("--image-size", action="append", type=_size_list, metavar="S[,S...]",
                   help="output size(s), repeatable: --image-size 192 --image-size 224 or "
                        "192,224 (default 224)")
    p.add_argument("--fit", choices=FITS, default=d.fit, help="crop: short side to "
                   "S, then the centre; pad: long side to S, padded with black (default crop)")
    p.add_argument("--quality", type=int, default=d.quality,
                   help=f"JPEG quality (default {d.quality})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"the split and the order "
                   f"(default {d.seed})")
    _split_flags(p, d)
    _output_flags(p, d)


def _split_flags(p, d: Settings) -> None:
    p.add_argument("--val-fraction", type=float, default=d.val_fraction, help=f"images "
                   f"split off (stratified by class) for val when SRC has none (default "
                   f"{d.val_fraction})")
    p.add_argument("--test-fraction", type=float, default=d.test_fraction, help=f"the same "
                   f"for test (default {d.test_fraction})")


def _output_flags(p, d: Settings) -> None:
    p.add_argument("--shard-mb", type=float, default=d.shard_mb, help=f"target file size in "
                   f"MB (default {d.shard_mb:g}; smaller sets get fewer, smaller files)")
    p.add_argument("--workers", type=int, default=0, help="encoding processes (default: "
                   "every core)")
    p.add_argument("--max-megapixels", type=float, default=d.max_megapixels, help=f"the "
                   f"largest image read (default {d.max_megapixels:g}; larger ones are skipped "
                   f"and listed, as unreadable ones are)")
    p.add_argument("--strict", action="store_true", help="stop at the first image that does "
                   "not decode (default: skip it, and list it at the end)")
    p.add_argument("--dedupe", action="store_true", help="keep one image of each group of "
                   "exact copies (the same pixels; the test split's copy when there is one); "
                   "recorded in convert.json")


def _size_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected sizes like 224 or 192,224, got {text!r}")


def main(args) -> int:
    sizes = tuple(s for group in args.image_size or [[224]] for s in group)
    convert(args.src, args.out, Settings(
        image_sizes=sizes, fit=args.fit, quality=args.quality, seed=args.seed,
        val_fraction=args.val_fraction, test_fraction=args.test_fraction,
        shard_mb=args.shard_mb, strict=args.strict, workers=args.workers,
        max_megapixels=args.max_megapixels, dedupe=args.dedupe))
    return 0

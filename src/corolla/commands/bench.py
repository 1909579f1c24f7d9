"""`corolla bench data` and `corolla bench train`: how fast the input pipeline is, against JPEG
decoding and against the model it feeds (`flows.bench`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.bench import data, train_command


HELP = ("measure the input pipeline: against JPEG decoding (bench data), against the model it "
        "feeds (bench train)")


def add_arguments(p) -> None:
    bench = p.add_subparsers(dest="bench", required=True, parser_class=type(p))
    b = bench.add_parser("data", help="images/s of parse+decode and of the training pipeline "
                         "with augmentation, and their ratio")
    b.add_argument("--data", required=True, help="folder holding tfrecords-jpeg-SxS/")
    b.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read "
                   "(default: the one nearest 192)")
    b.add_argument("--batch-size", type=int, default=128, help="images per batch (default 128)")
    b.add_argument("--batches", type=int, default=30, help="timed batches per round (default 30)")
    arguments.augment(b)
    b = bench.add_parser("train", help="steps/s of the model on the real pipeline against one "
                         "cached batch: is training input-bound?")
    b.add_argument("--data", required=True, help="folder holding tfrecords-jpeg-SxS/")
    b.add_argument("--model", help="registered model name (default small_cnn)")
    b.add_argument("--image-size", type=int, help="which tfrecords-jpeg-SxS to read")
    b.add_argument("--steps", type=int, default=20, help="timed steps per round (default 20)")
    arguments.augment(b)
    arguments.batch(b)
    arguments.runtime(b)


def main(args) -> int:
    if args.bench == "data":
        data(args.data, args.image_size or 0, args.batch_size,
             args.augment if args.augment is not None else "default", batches=args.batches)
    else:
        train_command(arguments.settings(args), steps=args.steps)
    return 0

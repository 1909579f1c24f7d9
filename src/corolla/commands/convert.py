"""`corolla convert`: an image folder or a CSV of path,label -> sharded TFRecords in the
competition layout (`flows.convert`)."""

from __future__ import annotations

from corolla.commands import arguments
from corolla.flows.convert import convert

HELP = ("an image folder or a CSV of path,label -> sharded TFRecords in the competition layout "
        "(OUT/tfrecords-jpeg-SxS/...)")


def add_arguments(p) -> None:
    p.add_argument("src", metavar="SRC", help="image folder (CLASS/*.jpg, optionally under "
                   "train/ val/ test/; test/ may hold unlabelled files) or a CSV with the "
                   "columns path,label[,split] (paths relative to the CSV's folder); never "
                   "modified")
    p.add_argument("out", metavar="OUT", help="the folder to write (must not exist)")
    arguments.conversion(p)


def main(args) -> int:
    convert(args.src, args.out, arguments.conversion_settings(args))
    return 0

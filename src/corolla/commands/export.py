"""`corolla export RUN --format F`: the run's model for deployment, checked (`flows.export`)."""

from __future__ import annotations

from corolla.evaluation import exported
from corolla.flows.export import CHECK_IMAGES, export


HELP = ("a run's model for deployment (SavedModel, LiteRT or ONNX) in a folder with classes.txt "
        "and export.json, checked against model.keras")


def add_arguments(p) -> None:
    p.add_argument("run", help="a run directory")
    p.add_argument("--format", required=True, choices=exported.FORMATS,
                   help="savedmodel (TensorFlow Serving), tflite (LiteRT: phones, edge) or "
                        "onnx (onnxruntime; needs corolla[export])")
    p.add_argument("--quantize", choices=exported.QUANTIZE, default="none",
                   help="tflite only: dynamic (int8 weights, about 4x smaller) or float16 "
                        "(2x smaller); default none (float32)")
    p.add_argument("--out", help="the folder to write (default: RUN/export-FORMAT[-QUANTIZE]/); "
                   "never an existing one")
    p.add_argument("--check-images", type=int, default=CHECK_IMAGES, metavar="N",
                   help=f"compare the export with model.keras on N val images (default "
                        f"{CHECK_IMAGES}; 0: no check)")


def main(args) -> int:
    export(args.run, args.format, out=args.out, quantize=args.quantize,
           check_images=args.check_images)
    return 0

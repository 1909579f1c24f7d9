"""`corolla bench`: the data pipeline and the training step measured on tiny data, each with its
one-line verdict, and an unknown augmentation named in one line."""

import re

from corolla.cli import main


def test_bench_data_prints_the_ratio(tiny_petals, capsys):
    assert main(["bench", "data", "--data", str(tiny_petals), "--batch-size", "8",
                 "--batches", "2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^parse\+decode +\d+ images/s", out, re.M)
    assert re.search(r"^training pipeline +\d+ images/s", out, re.M)
    ratio = float(re.search(r"^ratio=(\d+\.\d\d)$", out, re.M).group(1))
    assert ratio > 0


def test_bench_train_prints_a_verdict(tiny_petals, capsys):
    assert main(["bench", "train", "--data", str(tiny_petals), "--steps", "2",
                 "--batch-size", "8", "--augment", "flip,mixup"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^real pipeline +\d+\.\d\d steps/s", out, re.M)
    assert re.search(r"^one cached batch +\d+\.\d\d steps/s", out, re.M)
    assert re.search(r"^verdict: (input-bound: the model could take \d+\.\d\dx|not input-bound)",
                     out, re.M)


def test_an_unknown_augment_flag_is_one_line(tiny_petals, capsys):
    assert main(["bench", "data", "--data", str(tiny_petals), "--augment", "zoom"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("corolla: error: --augment: unknown augmentation 'zoom'")
    assert err.count("\n") == 1

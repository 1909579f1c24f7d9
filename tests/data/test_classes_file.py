"""A classes file reads back as the names written (the competition's trailing spaces kept), a
byte-order mark included."""

import pytest


def test_a_classes_file_with_a_bom_reads_as_its_names(tmp_path):
    from corolla.data.classes import parse_classes_file

    text = "\ufeffdaisy\nrose\n".encode("utf-8").decode("utf-8")
    assert parse_classes_file(text) == ("daisy", "rose")


def test_a_written_classes_file_reads_back_as_the_same_names():
    from corolla.data.classes import COMPETITION_CLASSES, format_classes_file, parse_classes_file
    from corolla.errors import UserError

    # The competition's names end with a space twice: kept exactly.
    assert parse_classes_file(format_classes_file(COMPETITION_CLASSES)) == COMPETITION_CLASSES
    with pytest.raises(UserError, match="occurs twice"):
        format_classes_file(["a", "b", "a"])

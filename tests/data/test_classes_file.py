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


@pytest.mark.parametrize("first, second", [
    ("café", "cafe\u0301"),  # composed and decomposed: two folders on Linux, one name to see
    ("rose", "rose\u200b"),  # a zero-width space
    ("rose", "ro\u00adse"),  # a soft hyphen
])
def test_class_names_that_read_alike_are_refused(first, second):
    """Names that differ only in how their letters are encoded or by invisible characters are
    one class to a reader: every table would show one name twice."""
    from corolla.data.classes import check_names
    from corolla.errors import UserError

    with pytest.raises(UserError, match=r"^class names .* and .* in the class folders of S "
                                        r"differ only by .*invisible characters or by how "
                                        r"their letters are encoded"):
        check_names(["daisy", first, second], "the class folders of S")


@pytest.mark.parametrize("name, says", [
    ("ro\u2028se", "holds LINE SEPARATOR (U+2028)"), ("ro\u2029se", "(U+2029)"),
    ("ro\x0bse", "holds a control character (U+000B)"), ("ro\x1cse", "(U+001C)"),
    ("ro\x85se", "(U+0085)"), ("ro\x00se", "(U+0000)"), ("\u200b", "is empty or only spaces"),
])
def test_class_names_that_some_reader_breaks_or_drops_are_refused(name, says):
    """Python's splitlines breaks a line at U+2028, \\x0b, \\x1c, \\x85 where classes.txt's reader
    does not: the same file would read as more names than it holds, and every later label
    would shift."""
    from corolla.data.classes import check_names
    from corolla.errors import UserError

    with pytest.raises(UserError) as refused:
        check_names(["daisy", name], "the class folders of S")
    assert str(refused.value).startswith(f"class name {name!r} in the class folders of S ")
    assert says in str(refused.value) and "\n" not in str(refused.value)


def test_names_in_other_scripts_and_with_accents_are_kept():
    from corolla.data.classes import check_names, format_classes_file, parse_classes_file

    names = ("café", "rosé", "蒲公英", "ромашка", "cyclamen ")
    assert check_names(names, "X") == names
    assert parse_classes_file(format_classes_file(names)) == names
    assert format_classes_file(names).splitlines() == list(names)

"""Comments and docstrings say why, not what a machine measured: no figure of this project's
hosts or data sets in src/corolla's (`helpers/host_figures.PATTERNS`); such figures live in
docs/benchmarks.md, "Figures behind the defaults". Read from the source; nothing of corolla is
imported."""

import textwrap

from helpers import host_figures
from helpers.imports import SRC


def test_no_host_or_data_set_figure_in_comments_or_docstrings():
    assert host_figures.report() == []


def test_every_top_level_module_is_scanned_or_named_as_not_yet():
    top = {p.name for p in (SRC / "corolla").iterdir()
           if p.suffix == ".py" or (p / "__init__.py").exists()}
    named = set(host_figures.SCANNED) | set(host_figures.NOT_YET) | {"__init__.py", "__main__.py"}
    assert top - named == set()
    assert set(host_figures.SCANNED) <= top


PLANTED = textwrap.dedent('''\
    """Measured on a 2-core CPU: 64 ms an epoch for flowers5's val split."""

    MAX_BATCH = 256  # an H100 ran 6,457 images/s at 256
    JIT = False  # about 5.5x slower with XLA, 47 s on a
    # CPU; a first version let a run end late.


    def f():
        """Val macro F1 0.97-0.98 after 8 epochs; this host took
        0.32 ms per 192 px image."""
    ''')


def test_the_scanner_finds_planted_figures_in_comments_and_docstrings():
    found = {(line, name) for line, name, _ in host_figures.hits(PLANTED)}
    assert found == {(1, "a host's cores"), (1, "a time per unit"),
                     (1, "the project's data set"), (3, "a named card"), (3, "a throughput"),
                     (4, "a speed ratio"), (4, "a time on a machine"), (5, "history"),
                     (9, "a run's score"), (9, "this host"), (10, "a time per unit")}


def test_facts_of_a_format_or_a_library_and_code_are_not_figures():
    source = textwrap.dedent('''\
        """The competition's 3,712 val images take 0.56 GB at 224 px; JAX's shutdown barrier
        gives up after 300 s. bfloat16 on cards of compute capability 8.0 (A100, L4, H100)."""

        NAME = "NVIDIA H100 80GB HBM3"  # as the driver reports it on this machine
        TOLERANCE = 1e-4  # float32 softmax rounding in the 6th decimal
        RATE = "2-core flowers5 64 ms an epoch"
        ''')
    assert host_figures.hits(source) == []

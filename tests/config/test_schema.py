import pytest

from corolla import config
from corolla.errors import UserError


def test_defaults_follow_the_tutorial():
    c = config.RunConfig()
    assert (c.train.epochs, c.train.batch_size) == (12, 16)
    assert (c.runtime.backend, c.runtime.strategy, c.runtime.precision) == ("auto",) * 3


def test_overrides_are_typed_and_do_not_touch_the_original():
    base = config.RunConfig()
    c = config.with_settings(base, {"train.epochs": "3", "train.learning_rate": "0.01",
                                    "data.augment": "false", "model.name": "vgg16"})
    assert (c.train.epochs, c.train.learning_rate, c.data.augment) == (3, 0.01, [])
    assert base.train.epochs == 12 and base.model.name == "small_cnn"


@pytest.mark.parametrize("updates, message", [
    ({"train.epoch": 3}, "unknown config key 'train.epoch'"),
    ({"trian.epochs": 3}, "unknown config section 'trian'"),
    ({"train.epochs": "many"}, "must be an int, got 'many'"),
    ({"train.epochs": 0}, "train.epochs must be at least 1, got 0"),
    ({"runtime.strategy": "bogus"}, "runtime.strategy must be one of"),
    ({"data.augment": "maybe"}, "unknown augmentation 'maybe'; names are crop, flip"),
    ({"data.augment": 3}, "must be a policy"),
    ({"train.size_ramp_start": 0.8, "train.size_ramp_end": 0.5},
     r"train.size_ramp_end must not be below train.size_ramp_start \(0.8\), got 0.5"),
    ({"train.start_size": -1}, "train.start_size must not be negative"),
    # Numbers past what anything can use are named with the bound, never taken and clamped.
    ({"train.seed": 99999999999999999999},
     "train.seed must be at most 4294967295, got 99999999999999999999"),
    ({"train.warmup_epochs": 1e300}, "train.warmup_epochs must be at most 10000, got 1e"),
    ({"train.frozen_epochs": 10**6}, "train.frozen_epochs must be at most 10000"),
    ({"data.shuffle_buffer": 10**12}, "data.shuffle_buffer must be at most 1000000"),
])
def test_bad_values_are_user_errors(updates, message):
    with pytest.raises(UserError, match=message):
        config.with_settings(config.RunConfig(), updates)


def test_file_then_overrides_and_round_trip(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[train]\nepochs = 5\nbatch_size = 8\n[model]\nname = "vgg16"\n')
    c = config.load_config(path, {"train.epochs": 2})
    assert (c.train.epochs, c.train.batch_size, c.model.name) == (2, 8, "vgg16")
    config.save_config(c, tmp_path / "saved.toml")
    assert config.load_config(tmp_path / "saved.toml") == c


def test_bad_files_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        config.load_config(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[train\n")
    with pytest.raises(UserError, match="not valid TOML"):
        config.load_config(tmp_path / "bad.toml")
    (tmp_path / "flat.toml").write_text("epochs = 3\n")
    with pytest.raises(UserError, match="must be a \\[table\\]"):
        config.load_config(tmp_path / "flat.toml")


def test_a_utf8_config_with_a_bom_is_read(tmp_path):
    from corolla import config

    path = tmp_path / "c.toml"
    path.write_bytes("[train]\nepochs = 2\n".encode("utf-8-sig"))
    assert config.load_config(path).train.epochs == 2


# corolla train's flags that set no config key: the config file, the run to resume, the data
# check's strictness and --help.
NOT_CONFIG = {"config", "resume", "strict", "help"}


def test_the_flags_and_the_fields_declarations_agree():
    """Every flag a field is declared with is one of `corolla train`'s, setting that field's key
    (through FLAG_KEYS); every other train flag is one that sets no config key. A flag added to
    the parser by hand for a config key, or a declared flag left out of it, fails here."""
    import argparse

    from corolla import cli
    from corolla.config import flags, schema

    top = cli.build_parser()
    subs = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    train = subs.choices["train"]
    dests = {}
    for action in train._actions:
        dests.setdefault(action.dest, []).extend(action.option_strings)
    declared = {s.keyword: s for s in schema.SETTINGS.values() if s.flag}
    assert declared, "no field declares a flag"
    for keyword, setting in declared.items():
        assert setting.flag in dests.get(keyword, []), (setting.key, setting.flag)
        assert flags.FLAG_KEYS[keyword] == setting.key
    assert set(flags.FLAG_KEYS) == set(declared)
    assert set(dests) - set(declared) == NOT_CONFIG, set(dests) - set(declared)


@pytest.mark.parametrize("text, message", [
    ("[train]\nepochs = 1e400\n", r"^train.epochs must be an int, got inf$"),
    ("[train]\nbatch_size = -1e400\n", r"^train.batch_size must be an int, got -inf$"),
])
def test_numbers_past_a_float_in_a_config_file_are_one_line(tmp_path, text, message):
    """TOML reads 1e400 as infinity: an integer setting given it was an OverflowError."""
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(UserError, match=message):
        config.load_config(tmp_path / "c.toml")


@pytest.mark.parametrize("what", ["config", "recipe"])
def test_arrays_nested_thousands_deep_are_one_line(tmp_path, what):
    """tomllib reads nesting by recursion: 5,000 levels were a RecursionError."""
    from corolla.config import recipe

    path = tmp_path / "deep.toml"
    path.write_text("[train]\nepochs = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(UserError, match=r"deep.toml' nests arrays or tables too deep to read"):
        config.load_config(path) if what == "config" else recipe.load_recipe(str(path))

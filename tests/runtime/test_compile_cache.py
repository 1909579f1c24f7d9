"""JAX's persistent compilation cache: where Corolla's setting puts it."""

from corolla.runtime import compile_cache


def test_the_compile_cache_setting_names_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("COROLLA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    assert compile_cache.folder("auto") == tmp_path / "jax-compile"
    assert compile_cache.folder("off") is None
    assert compile_cache.folder(str(tmp_path / "x")) == tmp_path / "x"
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache.folder("auto") == tmp_path / "jax"  # JAX's own setting is kept

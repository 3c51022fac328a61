"""docs/api.md is generated from the docstrings (docs/make_api.py) and must be up to date."""

import importlib.util
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def test_api_reference_is_up_to_date():
    spec = importlib.util.spec_from_file_location("make_api", REPO / "docs" / "make_api.py")
    make_api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_api)
    expected = make_api.render()
    assert (REPO / "docs" / "api.md").read_text() == expected, \
        "docs/api.md is out of date: run python docs/make_api.py"
    for module in make_api.MODULES:  # every public module has its section
        assert f"\n## `{module}`\n" in expected
    assert "### `jaxdali.fn.readers.file`" in expected and "### `jaxdali.plugin.jax.data_iterator`" in expected

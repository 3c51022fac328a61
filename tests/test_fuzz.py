"""The decoders against a few hundred seeded mutations of real images (``tests/fuzz.py``; the script
runs 10,000 and more: ``python -m tests.fuzz --cases 10000``)."""

from __future__ import annotations

import pytest

from tests import fuzz

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _shared_images(shared_data):
    return shared_data


def test_every_fuzzed_file_decodes_or_fails_cleanly_and_silently():
    results = fuzz.fuzz(cases=300, seed=15, workers=2, timeout=60)
    report = fuzz.summary(results)
    assert report["cases"] == 300
    assert set(report["outcomes"]) == {"image", "error"}, report


def test_a_crashing_case_is_counted_not_fatal(monkeypatch):
    monkeypatch.setenv("JAXDALI_FUZZ_CRASH_AT", "4")
    results = fuzz.fuzz(cases=8, seed=15, workers=1, timeout=60)
    assert sorted(results) == list(range(1, 9))
    assert results[4]["outcome"] == "crash" and "-11" in results[4]["detail"]
    assert all(r["outcome"] in fuzz.GOOD_OUTCOMES for case, r in results.items() if case != 4)

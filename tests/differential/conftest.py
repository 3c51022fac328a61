"""Every differential test compares jaxdali with DALI on the shared photos: without them (a checkout with no
``../shared`` beside it) the tests skip instead of failing on empty inputs."""

import pytest

from tests.differential.twin import PHOTOS


@pytest.fixture(scope="session", autouse=True)
def _shared_photos() -> None:
    if not PHOTOS.is_dir():
        pytest.skip(f"shared test photos not found at {PHOTOS}")

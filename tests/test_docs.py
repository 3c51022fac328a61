"""Every ```python block of README.md and docs/*.md runs: the blocks of one file run in order, in one
fresh interpreter (8 simulated CPU devices, the working directory a temporary folder), so a page
may build on its earlier blocks. A block whose first line is ``# not run: <reason>`` is skipped; it
is for what cannot run here (several hosts)."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def python_blocks(page: pathlib.Path) -> list[str]:
    """The page's python blocks that run (``# not run: <reason>`` blocks left out)."""
    blocks = _BLOCK.findall(page.read_text())
    for block in blocks:
        if block.startswith("# not run") and not re.match(r"# not run: \S", block):
            raise AssertionError(f"{page.name}: a '# not run' block must say why: {block.splitlines()[0]!r}")
    return [b for b in blocks if not b.startswith("# not run: ")]


def test_every_page_with_code_is_checked():
    assert {p.name for p in PAGES if python_blocks(p)} >= {"README.md", "getting_started.md", "data_iterator.md",
                                                           "checkpointing.md", "writing_operators.md"}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name)
def test_code_blocks_run(page, tmp_path, subprocess_env, digits_root):
    script = "\n\n".join(f"# --- block {i + 1} of {page.name}\n{block}" for i, block in enumerate(python_blocks(page)))
    (tmp_path / "page.py").write_text(script)
    env = dict(subprocess_env, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "page.py"], cwd=tmp_path, capture_output=True, text=True, env=env,
                          timeout=280)
    assert done.returncode == 0, f"{page.name}:\n{done.stderr[-4000:]}"

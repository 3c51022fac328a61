"""Every ```python block of README.md and docs/*.md runs. The blocks of one page run in order in one
namespace (a page may build on its earlier blocks), in their own working directory; all pages run
in one fresh interpreter with 8 simulated CPU devices. A block whose first line is
``# not run: <reason>`` is skipped; it is for what cannot run here (several hosts)."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

# Runs {page name: code} each in a fresh namespace and working directory; prints {page: traceback}.
_RUNNER = """
import json, linecache, os, sys, traceback
pages, failures = json.load(open(sys.argv[1])), {}
for name, code in pages.items():
    os.makedirs(name, exist_ok=True)
    os.chdir(name)
    # The source of the page's functions, as for a script (enable_conditionals=True reads it).
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except BaseException:
        failures[name] = traceback.format_exc()
    os.chdir("..")
print(json.dumps(failures))
"""


def python_blocks(page: pathlib.Path) -> list[str]:
    """The page's python blocks that run (``# not run: <reason>`` blocks left out)."""
    blocks = _BLOCK.findall(page.read_text())
    for block in blocks:
        if block.startswith("# not run") and not re.match(r"# not run: \S", block):
            raise AssertionError(f"{page.name}: a '# not run' block must say why: {block.splitlines()[0]!r}")
    return [b for b in blocks if not b.startswith("# not run: ")]


def test_every_page_with_code_is_checked():
    assert {p.name for p in PAGES if python_blocks(p)} >= {"README.md", "getting_started.md", "data_iterator.md",
                                                           "checkpointing.md", "writing_operators.md",
                                                           "porting_from_dali.md"}


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_code_blocks_run(tmp_path, subprocess_env, digits_root):
    pages = {p.name: "\n\n".join(python_blocks(p)) for p in PAGES if python_blocks(p)}
    (tmp_path / "pages.json").write_text(json.dumps(pages))
    (tmp_path / "runner.py").write_text(_RUNNER)
    env = dict(subprocess_env, XLA_FLAGS="--xla_force_host_platform_device_count=8", JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "runner.py", "pages.json"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=380)
    assert done.returncode == 0, done.stderr[-4000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "\n\n".join(f"{page}:\n{tb}" for page, tb in failures.items())

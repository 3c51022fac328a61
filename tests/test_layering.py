"""The package layers: every import of every jaxdali module (module level, function-local and
``TYPE_CHECKING`` imports alike, read with ``ast``) goes down or sideways in ``LAYERS``, never up, and
no two units import each other, directly or around a loop.

The order (docs/architecture.md, "Layers and the operator contract"): the foundation (types, tensors,
checkpoint format, options) below the operators, the operators below the pipeline, the pipeline below
the framework plugins, and the applications (command line, tools, the package's front door) on top.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE_ROOT = pathlib.Path(__file__).resolve().parent.parent

#: Lowest first. Each unit is a module or a package (with everything below it, unless a longer unit
#: names a part of it); a module belongs to the longest unit that is a prefix of its name. The root
#: package as a unit is its ``__init__`` alone.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("jaxdali._caller", "jaxdali.types", "jaxdali.tensors", "jaxdali.tfrecord", "jaxdali.core",
                    "jaxdali.pickling")),
    ("operators", ("jaxdali.ops",)),
    ("pipeline", ("jaxdali.pipeline", "jaxdali.fn")),
    ("pipeline libraries", ("jaxdali.auto_aug",)),
    ("plugins", ("jaxdali.plugin", "jaxdali.plugin.jax", "jaxdali.plugin.pytorch")),
    ("applications", ("jaxdali", "jaxdali.backend", "jaxdali.backend_impl", "jaxdali.config", "jaxdali.datasets",
                      "jaxdali.cli", "jaxdali.tools", "jaxdali.__main__")),
)


def module_files(root: pathlib.Path, package: str) -> dict[str, tuple[pathlib.Path, bool]]:
    """``{dotted module name: (file, is a package's __init__)}`` for every module of ``package``."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    return modules


def imports_of(path: pathlib.Path, module: str, is_package: bool, known: set[str],
               package: str) -> list[tuple[str, int]]:
    """(imported module, line) for each import of ``package`` anywhere in the file: the module itself
    where it exists, else the closest enclosing package (``from pkg import name`` of a non-module)."""

    def closest(name: str) -> str:
        while name not in known and "." in name:
            name = name.rpartition(".")[0]
        return name

    found = []
    here = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(closest(a.name), node.lineno) for a in node.names
                      if a.name == package or a.name.startswith(package + ".")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if base != package and not base.startswith(package + "."):
                continue
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.append((name if name in known else closest(base), node.lineno))
    return found


def unit_of(module: str, units: list[str], package: str) -> str | None:
    matches = [u for u in units if module == u or (u != package and module.startswith(u + "."))]
    return max(matches, key=len) if matches else None


def layering_violations(root: pathlib.Path, package: str,
                        layers: tuple[tuple[str, tuple[str, ...]], ...]) -> list[str]:
    """What breaks the layering of ``package`` under ``root``: upward imports, cycles between units,
    modules in no unit. Empty when the layering holds."""
    rank = {unit: k for k, (_, units) in enumerate(layers) for unit in units}
    units = list(rank)
    modules = module_files(root, package)
    problems = [f"{m} is in no unit of LAYERS (add it where it belongs)" for m in modules if unit_of(m, units, package) is None]
    edges: dict[str, dict[str, str]] = {}  # unit -> unit it imports -> one import that does it
    for module, (path, is_package) in modules.items():
        source = unit_of(module, units, package)
        if source is None:
            continue
        for target_module, line in imports_of(path, module, is_package, set(modules), package):
            target = unit_of(target_module, units, package)
            if target is None or target == source:
                continue
            where = f"{path.relative_to(root)}:{line} imports {target_module}"
            if rank[target] > rank[source]:
                problems.append(f"upward import: {where} ({layers[rank[source]][0]} -> {layers[rank[target]][0]})")
            edges.setdefault(source, {}).setdefault(target, where)
    problems += [" -> ".join(cycle) for cycle in _cycles(edges)]
    return problems


def _cycles(edges: dict[str, dict[str, str]]) -> list[list[str]]:
    """One loop (as the imports that make it) through each unit that can reach itself."""
    loops, reported = [], set()
    for start in sorted(edges):
        stack, seen = [(start, [])], set()
        while stack:
            unit, path = stack.pop()
            for target, where in sorted(edges.get(unit, {}).items()):
                if target == start:
                    loop = path + [where]
                    key = frozenset(loop)
                    if key not in reported:
                        reported.add(key)
                        loops.append(["cycle: " + loop[0]] + loop[1:])
                elif target not in seen:
                    seen.add(target)
                    stack.append((target, path + [where]))
    return loops


def test_no_import_goes_up_a_layer_and_no_units_import_each_other():
    problems = layering_violations(PACKAGE_ROOT, "jaxdali", LAYERS)
    assert not problems, "the layering is broken:\n" + "\n".join(problems)


def test_the_layers_name_existing_units():
    modules = module_files(PACKAGE_ROOT, "jaxdali")
    for _, units in LAYERS:
        for unit in units:
            assert unit in modules, f"LAYERS names {unit}, which is no module of jaxdali"


def _write(root: pathlib.Path, files: dict[str, str | None]) -> None:
    for name, text in files.items():
        if text is None:
            continue
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


TOY_LAYERS = (("low", ("toy.low",)), ("mid", ("toy.mid", "toy.side")), ("high", ("toy", "toy.high")))


@pytest.mark.parametrize("files, expected", [
    ({"low.py": "def f():\n    from toy import high\n"}, "upward import: toy/low.py:2 imports toy.high (low -> high)"),
    ({"low.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.mid import x\n"},
     "upward import: toy/low.py:3 imports toy.mid (low -> mid)"),
    ({"low.py": None, "low/__init__.py": "", "low/a.py": "from ..mid import thing\n"},
     "upward import: toy/low/a.py:1 imports toy.mid (low -> mid)"),
    ({"mid.py": "import toy.side\n", "side.py": "def g():\n    import toy.mid\n"},
     "cycle: toy/mid.py:1 imports toy.side -> toy/side.py:2 imports toy.mid"),
    ({"extra.py": ""}, "toy.extra is in no unit of LAYERS (add it where it belongs)"),
    ({"mid.py": "from toy import low\n", "high.py": "import toy.mid\nfrom . import side\n"}, None),
])
def test_the_checker_finds_upward_imports_cycles_and_strays(tmp_path, files, expected):
    """The checker itself, on a toy package: function-local, TYPE_CHECKING and relative imports count;
    imports down and sideways pass."""
    _write(tmp_path / "toy", {"__init__.py": "", "low.py": "", "mid.py": "", "side.py": "", "high.py": ""} | files)
    problems = layering_violations(tmp_path, "toy", TOY_LAYERS)
    assert problems == ([] if expected is None else [expected])

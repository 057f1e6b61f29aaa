"""docs/modules.md is what ``scripts/module_map.py`` makes of the docstrings, and every package says what
it is for (docs/architecture.md §2.5)."""

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _generator():
    spec = importlib.util.spec_from_file_location("module_map", ROOT / "scripts" / "module_map.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_module_map_is_the_generated_one() -> None:
    generator = _generator()
    committed = (ROOT / "docs" / "modules.md").read_text()
    assert committed == generator.module_map(ROOT), (
        f"docs/modules.md is stale: run `{generator.COMMAND}` and commit it"
    )


def test_every_package_says_what_it_is_for() -> None:
    placeholders = []
    for init in sorted((ROOT / "mqha").rglob("__init__.py")):
        text = ast.get_docstring(ast.parse(init.read_text())) or ""
        if len(text.split()) < 8 or text.strip().endswith(" package."):
            placeholders.append(str(init.relative_to(ROOT)))
    assert not placeholders, f"package docstrings that do not say what the package is for: {placeholders}"

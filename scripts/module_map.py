"""Print docs/modules.md, the module map of mqha, from the package and module docstrings.

    python scripts/module_map.py > docs/modules.md

Each package gets the first paragraph of its ``__init__`` docstring, each module the first sentence of
its own. A module is marked *core* when the ``cores`` contract of ``.importlinter`` lists it (or its
package). ``tests/unit/layout/test_module_map.py`` fails when the committed map differs.
"""

import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "python scripts/module_map.py > docs/modules.md"
LONGEST = 200  # characters of a module's summary; a longer first sentence is cut at a word
# a full stop that ends a sentence: not the one of "e.g." or "i.e.", not inside ".." or a dotted name
SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\.)\.(?=\s|$)")

HEADER = f"""# Module map

Every package of `mqha/` and what it is for, then every module and its one job, generated from their
docstrings: edit a docstring, then run `{COMMAND}`
(`tests/unit/layout/test_module_map.py` fails until the two agree). *core*: the module is in the `cores`
import contract of `.importlinter`, which `lint-imports` checks (values in, values out: no sockets,
threads, event loops or clocks). A module outside it that calls itself "(core)" is pure by intent but
not yet checked. Where decisions live: `docs/overview.md`; the layers between the packages:
docs/architecture.md §2.3.
"""


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def _first_paragraph(text: str) -> str:
    return " ".join(text.strip().split("\n\n")[0].split())


def _first_sentence(text: str) -> str:
    paragraph = _first_paragraph(text)
    end = SENTENCE_END.search(paragraph)
    sentence = paragraph[: end.end()] if end else paragraph
    if len(sentence) > LONGEST:
        sentence = sentence[:LONGEST].rsplit(" ", 1)[0] + " …"
    return sentence


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _cores(root: Path) -> set[str]:
    contracts = configparser.ConfigParser()
    contracts.read(root / ".importlinter")
    return set(contracts["importlinter:contract:cores"]["source_modules"].split())


def _is_core(module: str, cores: set[str]) -> bool:
    parts = module.split(".")
    return any(".".join(parts[:n]) in cores for n in range(2, len(parts) + 1))


def _package_of(path: Path, root: Path) -> Path:
    folder = path.parent
    while not (folder / "__init__.py").is_file() and folder != root:
        folder = folder.parent
    return folder


def module_map(root: Path = ROOT) -> str:
    """The text of docs/modules.md for the tree at ``root``."""
    package_root = root / "mqha"
    cores = _cores(root)
    modules: dict[Path, list[Path]] = {}
    for path in sorted(package_root.rglob("*.py")):
        if "__pycache__" not in path.parts and path.name != "__init__.py":
            modules.setdefault(_package_of(path, package_root), []).append(path)
    lines = [HEADER]
    for package in sorted(modules, key=lambda p: p.relative_to(root).parts):
        name = ".".join(package.relative_to(root).parts)
        lines += [f"## `{name}`", "", _first_paragraph(_docstring(package / "__init__.py")), ""]
        lines += ["| module | kind | what it is |", "|---|---|---|"]
        for path in modules[package]:
            dotted = ".".join(path.relative_to(root).with_suffix("").parts)
            kind = "core" if _is_core(dotted, cores) else ""
            label = path.relative_to(package).with_suffix("").as_posix()
            lines.append(f"| `{label}` | {kind} | {_cell(_first_sentence(_docstring(path)))} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(module_map())

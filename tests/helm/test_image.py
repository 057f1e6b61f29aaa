"""The container recipe (Dockerfile, .dockerignore) against pyproject.toml; no Docker engine needed."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = (line.strip() for line in text.splitlines())
    return [
        (word.upper(), rest.strip())
        for word, _, rest in (line.partition(" ") for line in lines if line and not line.startswith("#"))
    ]


def test_dockerfile_runs_the_console_scripts_as_a_non_root_user() -> None:
    steps = _instructions()
    args = dict(rest.split("=", 1) for word, rest in steps if word == "ARG" and "=" in rest)
    bases = [
        rest.split()[0].replace("${PYTHON_IMAGE}", args.get("PYTHON_IMAGE", ""))
        for w, rest in steps
        if w == "FROM"
    ]
    assert bases and all(re.fullmatch(r"python:3\.11-slim(-\w+)?", base) for base in bases), bases
    users = [rest for word, rest in steps if word == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*(:\d+)?", users[-1]), (
        "the last USER must be a numeric non-root uid"
    )
    # the chart runs mqproxy too: the image needs its extra (grpcio, the v2 protocol modules)
    assert any('pip install ".[proxy]"' in rest for word, rest in steps if word == "RUN")
    assert any("import mqha.proxy.v2" in rest for word, rest in steps if word == "RUN")
    # the slim base has no compiler: without gcc the commit-log codec would fall back to pure Python
    assert any("gcc" in rest for word, rest in steps if word == "RUN")
    assert any("assert NATIVE" in rest for word, rest in steps if word == "RUN")
    # the chart runs these commands by name: they must be on PATH in the image
    assert any(w == "ENV" and "PATH=/opt/mqha/bin:" in rest for w, rest in steps)
    for script in ("mqcontroller", "mqbroker", "mqadmin", "mqproxy"):
        assert script in PYPROJECT["project"]["scripts"]


def test_dockerignore_lets_every_package_in() -> None:
    allowed = {
        line[1:].strip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.startswith("!")
    }
    top_level = {
        name.split(".")[0] for name in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    assert top_level == {"mqha"}, "one import root (docs/architecture.md §2)"
    missing = top_level - allowed
    assert not missing, f".dockerignore keeps these packages out of the image build: {sorted(missing)}"
    assert {"pyproject.toml", PYPROJECT["project"]["readme"]} <= allowed


def test_chart_test_dependencies_are_in_the_test_extras() -> None:
    """scripts/setup.sh installs '.[test]': the chart tests' dependencies must be listed there."""
    test_extras = PYPROJECT["project"]["optional-dependencies"]["test"]
    names = {re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0].lower(): req for req in test_extras}
    assert re.fullmatch(r"helm-python-sdk==[\d.]+", names["helm-python-sdk"]), "pin helm-python-sdk exactly"
    assert "kubernetes-validate" in names
    assert "pyyaml" in names
    assert "'.[test]'" in (ROOT / "scripts" / "setup.sh").read_text()

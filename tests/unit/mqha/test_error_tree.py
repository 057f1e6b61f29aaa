"""One error tree: every exception class mqha defines derives from ``MqhaError`` (mqha/errors.py)."""

import importlib
import pkgutil

import mqha
from mqha.errors import MqhaError

# classes allowed outside the tree, by qualified name, each with why; none so far
OUTSIDE_THE_TREE: dict[str, str] = {}


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_all_subclasses(sub)}
    return found


def test_every_exception_class_of_mqha_is_an_mqha_error() -> None:
    for module in pkgutil.walk_packages(mqha.__path__, "mqha."):
        importlib.import_module(module.name)
    outside = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _all_subclasses(BaseException)
        if cls.__module__.split(".")[0] == "mqha" and not issubclass(cls, MqhaError)
    )
    unexplained = [name for name in outside if name not in OUTSIDE_THE_TREE]
    assert not unexplained, (
        f"exception classes outside MqhaError: {unexplained}; derive them from mqha.errors.MqhaError "
        "(keep a builtin base callers catch: class X(MqhaError, ValueError))"
    )


def test_a_planted_exception_outside_the_tree_is_found() -> None:
    planted = type("PlantedError", (ValueError,), {"__module__": "mqha.planted"})
    assert planted in _all_subclasses(BaseException)
    assert not issubclass(planted, MqhaError)

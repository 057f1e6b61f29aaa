"""Optional parts of mqha (pyproject extras) and the one-line error when one is missing.

A core install runs controllers, brokers, the client and mqadmin. ``analysis`` adds PySpark for
``mqha analyze``; ``test`` and ``bench`` add the test and profiling tools (docs/architecture.md §2).
"""

import importlib.util

from mqha.errors import MissingExtraError


def require_extra(extra: str, module: str, purpose: str) -> None:
    """Raise ``MissingExtraError`` unless ``module`` (provided by ``mqha[extra]``) can be imported."""
    if importlib.util.find_spec(module) is None:
        raise MissingExtraError(extra, purpose)

"""Optional parts: a missing extra is one line naming what to install (docs/architecture.md §2)."""

import pytest

from mqha.errors import MissingExtraError, MqhaError
from mqha.extras import require_extra


def test_an_importable_module_passes() -> None:
    require_extra("analysis", "json", "for Spark")


def test_a_missing_module_names_the_extra_to_install() -> None:
    with pytest.raises(MissingExtraError) as caught:
        require_extra("analysis", "mqha_no_such_module", "for Spark")
    assert str(caught.value) == "install mqha[analysis] for Spark"
    assert caught.value.extra == "analysis"
    assert isinstance(caught.value, MqhaError)

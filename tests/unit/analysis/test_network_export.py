"""``mqha export --controller``'s argument handling and its answer when no controller answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqha.analysis.network_export import split_addresses
from mqha.cli import main as mqha_main
from tests.helpers.processes import free_port


def test_controller_addresses_may_be_repeated_or_joined() -> None:
    assert split_addresses(["a:1;b:2", "c:3", "a:1", " d:4 , e:5 "]) == ["a:1", "b:2", "c:3", "d:4", "e:5"]


def test_no_controller_answering_is_exit_2_and_extra_paths_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    assert mqha_main(["export", "--controller", dead, str(tmp_path / "out")]) == 2
    assert "no controller answered" in capsys.readouterr().err
    assert mqha_main(["export", "--controller", dead, str(tmp_path / "run"), str(tmp_path / "out")]) == 2

"""Demo and chaos runs delete a run directory they made for themselves after a pass, and keep (and
name) it otherwise (issue 30: every demo run left 13-49 MB in the temp directory)."""

from __future__ import annotations

from pathlib import Path

from mqha.cluster.local import LocalCluster


def _cluster(run_dir: Path) -> LocalCluster:
    cluster = LocalCluster(run_dir, controllers=1, groups=1, replicas=1)
    run_dir.mkdir(parents=True)
    (run_dir / "some.log").write_text("x")
    return cluster


def test_a_passed_run_in_its_own_temporary_directory_removes_it(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path / "run")
    assert cluster.discard_or_keep(temporary=True, ok=True) == f"removed the run directory {cluster.run_dir}"
    assert not cluster.run_dir.exists()


def test_a_failed_run_or_a_given_directory_is_kept_and_named(tmp_path: Path) -> None:
    failed = _cluster(tmp_path / "failed")
    line = failed.discard_or_keep(temporary=True, ok=False)
    assert failed.run_dir.exists() and str(failed.run_dir) in line and "did not pass" in line
    given = _cluster(tmp_path / "given")
    assert given.run_dir.exists() and str(given.run_dir) in given.discard_or_keep(temporary=False, ok=True)
    assert given.run_dir.exists()

"""``mqha store reset-identity`` (docs/architecture.md §9.4): what it removes and sets aside."""

from __future__ import annotations

from pathlib import Path

from mqha import cli
from mqha.broker.store_commands import reset_identity


def test_reset_removes_the_identity_and_store_id_and_sets_the_history_aside(tmp_path: Path) -> None:
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    for name, text in {
        "brokerIdentity": "c#b#1#x#y",
        "brokerIdentity-temp": "c#b#1#a:1;2",
        "storeId": "s",
        "mqbroker.pid": "1",
        "history.db": "h",
        "history.db-wal": "w",
        "epochFileCheckpoint": "0\n0\n",
    }.items():
        (root / name).write_text(text)
    lines = reset_identity(str(root), str(root / "brokerIdentity"))
    assert sorted(p.name for p in root.iterdir()) == [
        "commitlog",
        "epochFileCheckpoint",
        "history.db.before-reset",
        "history.db.before-reset-wal",
    ]
    assert (root / "history.db.before-reset").read_text() == "h"
    assert len(lines) == 7 and "new replica" in lines[-1]
    assert reset_identity(str(root), str(root / "brokerIdentity"))[:-1] == []  # again: nothing to do


def test_the_command_reads_the_broker_config(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path / "store"
    root.mkdir()
    (root / "brokerIdentity").write_text("c#b#1")
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerClusterName=c\nbrokerName=b\nenableControllerMode=true\ncontrollerAddr=127.0.0.1:9878\nstorePathRootDir={root}\n"
    )
    assert cli.main(["store", "reset-identity", "-c", str(conf)]) == 0
    assert not (root / "brokerIdentity").exists()
    assert "removed" in capsys.readouterr().out
    assert cli.main(["store", "reset-identity", "-c", str(tmp_path / "missing.conf")]) == 2

"""A controller whose Raft state is damaged says so and never leads (issue 45, findings 2 and 3).

Real ``mqcontroller`` processes on 127.0.0.1. A follower's journal takes one flipped bit in a committed
ElectMaster (``"newMasterBrokerId":3`` -> ``2``, or its ``{``) while it is down. Before the journal had
checksums it restarted healthy, at the same applied index as its peers, with the wrong master (or, for
the ``{``, the election skipped as a no-op: the epoch rollback that lost data), and could lead. Now the
damage is found at start (the record's CRC32), or at apply for a journal in the old format without
checksums: the member applies nothing past it, /healthz says 503 with the reason, a metric says so,
and it grants no vote and never stands, so it never leads (docs/raft.md §11).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pysyncobj.journal import FileJournal

from mqha.controller.raft import journal_format
from tests.helpers.processes import ProcessGroup, wait_healthy, wait_until
from tests.integration.controller_cluster import (
    ControllerCluster,
    Node,
    beating_replicas,
    groups_of,
    mqcontroller_command,
)
from tests.integration.raft_cluster import RaftCluster

pytestmark = pytest.mark.integration

ELECTION = b'"newMasterBrokerId":3'


def _flip_master_id(data: bytes) -> bytes:
    at = data.index(ELECTION) + len(ELECTION) - 1
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]  # "3" (0x33) -> "2" (0x32)


def _flip_brace(data: bytes) -> bytes:
    at = data.rindex(b"{", 0, data.index(ELECTION))
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]  # "{" (0x7b) -> "z" (0x7a)


def _in_place(flip: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    def damage(journal: Path) -> None:
        journal.write_bytes(flip(journal.read_bytes()))

    return damage


def _as_stock_format(flip: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """The journal rewritten as PySyncObj's stock format (no checksums, as before this fix), with the
    ElectMaster's command damaged: only apply can tell."""

    def damage(journal: Path) -> None:
        entries = journal_format.parse(journal.read_bytes()).entries
        journal.unlink()
        stock = FileJournal(str(journal))
        for command, index, term in entries:
            stock.add(flip(command) if ELECTION in command else command, index, term)
        stock._destroy()

    return damage


def _restart(cluster: ControllerCluster, node: Node) -> None:
    node.proc = cluster.group.start(
        [*mqcontroller_command(), "-c", str(node.conf)],
        log_path=node.log_path,
        name=f"mqcontroller-{node.node_id}",
    )


def _healthz(node: Node) -> tuple[int, dict[str, Any]] | None:
    try:
        return node.get("/healthz", timeout=1.0)
    except OSError:
        return None


def _master_of_b1(node: Node) -> int | None:
    group = groups_of(node.state()["state"]).get("b1")
    return None if group is None else group.get("masterBrokerId")


@pytest.mark.parametrize(
    ("damage", "found"),
    [
        (_in_place(_flip_master_id), "checksum mismatch"),
        (_in_place(_flip_brace), "checksum mismatch"),
        (_as_stock_format(_flip_brace), "cannot be applied"),
        # still a valid record: applied (master 2 here), then found apart from the leader's state digest
        (_as_stock_format(_flip_master_id), "differs from the leader's"),
    ],
    ids=["master-id-bit", "brace-bit", "brace-bit-without-checksums", "master-id-bit-without-checksums"],
)
def test_a_follower_with_a_flipped_bit_in_a_committed_election_is_damaged_and_never_leads(
    group: ProcessGroup, tmp_path: Path, damage: Callable[[Path], None], found: str
) -> None:
    digests = {"controllerStateDigestIntervalMills": "300"}
    cluster = ControllerCluster(group, tmp_path / "controllers", settings=digests)
    cluster.start()
    with beating_replicas(cluster, "b1", 3):
        status, body = cluster.leader(timeout=10).post(
            "/v1/groups/b1/elect", {"clusterName": "c1", "brokerId": 3}
        )
        assert status == 200 and body["masterBrokerId"] == 3, body
    cluster.wait_same_state(cluster.nodes, timeout=5)
    time.sleep(1.5)  # each member stores its commit index once a second: the election is committed on disk
    leader = cluster.leader(timeout=5)
    follower, other = cluster.followers(leader)

    follower.proc.kill()
    damage(follower.store / "raft.journal")
    _restart(cluster, follower)

    def settled() -> tuple[int, dict[str, Any]] | None:  # healthy or damaged, not merely starting
        answer = _healthz(follower)
        return answer if answer and (answer[0] == 200 or answer[1].get("damage")) else None

    # Never healthy first: a member is healthy only once its files were checked and replayed.
    status, body = wait_until(settled, 20, message="the restarted member's /healthz")
    assert status == 503, (
        f"a damaged member answered /healthz {status}: {body} (b1's master: {_master_of_b1(follower)})"
    )
    assert "raft member damaged" in body["remark"] and found in body["remark"], body
    assert follower.get("/livez", timeout=2.0)[0] == 200  # alive: Kubernetes must not restart it
    raft = follower.state()["raft"]
    assert raft["damage"] and not raft["healthy"], raft
    metrics = follower.call("GET", "/metrics")[1]
    assert "mqha_controller_raft_damaged 1.0" in metrics
    wrong_master = found == "differs from the leader's"  # the one damage that applies before it shows
    assert wrong_master or _master_of_b1(follower) != 2  # it applied nothing past the damage

    # It never leads: with the leader down, the other member cannot win (the damaged one grants no
    # vote) and the damaged one never stands.
    leader.proc.kill()
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        raft = follower.state()["raft"]
        assert raft["state"] != "leader" and not raft["serving"], raft
        assert wrong_master or _master_of_b1(follower) != 2
        time.sleep(0.05)
    assert follower.state()["raft"]["term"] == raft["term"]  # it never stood for election
    _restart(cluster, leader)
    wait_healthy([(leader.proc, leader.url)], 20)
    serving = cluster.leader(timeout=15, among=[leader, other])
    status, body = serving.get("/v1/groups/b1/replica-info")
    assert status == 200 and body["masterBrokerId"] == 3, body
    assert follower.state()["raft"]["damage"]  # still damaged: repaired only by replacing its store


def test_a_member_with_a_damaged_dump_never_wins_an_election_and_the_others_serve(
    group: ProcessGroup, tmp_path: Path
) -> None:
    """Issue 45, finding 3: a follower whose ``raft.dump`` took a flipped bit was found unhealthy but
    still voted and won elections; while it led, nothing was served. Members of ``raft_node.py``
    (the replicated log alone), compacting every 50 entries so every member has a dump."""
    cluster = RaftCluster(group, tmp_path, extra_args=["--compaction-min-entries", "50"])
    cluster.start()
    leader = cluster.serving_leader(timeout=10)
    status, load = leader.post("/load", {"count": 120, "concurrency": 4, "prefix": "a"}, timeout=30)
    assert status == 200 and load["ok"] == 120, load
    wait_until(
        lambda: all((m.store / "raft.dump").exists() for m in cluster.members),
        10,
        message="dumps",
    )
    damaged = next(m for m in cluster.members if m is not leader)
    cluster.kill(damaged)
    dump = damaged.store / "raft.dump"
    data = bytearray(dump.read_bytes())
    data[len(data) // 2] ^= 0x10
    dump.write_bytes(bytes(data))
    cluster.start([damaged.index], wait=False)

    status = wait_until(
        lambda: (s := damaged.try_status()) and s.get("damage") and s, 20, message="the member reports damage"
    )
    assert "raft.dump" in status["damage"] and not status["healthy"], status
    term = status["term"]
    for round_ in range(3):  # each time the leader goes, the damaged member must not take over
        leader = cluster.serving_leader(timeout=10)
        if leader is damaged:
            pytest.fail(f"round {round_}: the member with a damaged dump serves as leader")
        cluster.kill(leader)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            status = damaged.get("/status")
            assert status["state"] != "leader", f"round {round_}: the damaged member leads: {status}"
            time.sleep(0.05)
        cluster.start([leader.index])
        serving = cluster.serving_leader(timeout=10)
        assert serving is not damaged
        assert serving.propose({"op": "set", "key": f"after{round_}", "value": "x"})[0] == 200
    assert damaged.get("/status")["term"] == term  # it never stood for election

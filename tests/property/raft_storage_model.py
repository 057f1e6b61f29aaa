"""A pure, deterministic model of the controller's Raft group with storage identity (issue 24).

Raft as PySyncObj 0.3.17 runs it (docs/raft.md §1, §2), reduced to what decides safety:

- each store persists ``currentTerm``, ``votedFor``, its log and its commit index; a crash keeps the
  store, a restart replays the log up to the stored commit index locally;
- a candidate increments its term and votes for itself; a voter grants one vote per term, only to a
  candidate whose log is at least as up to date, and a candidate counts every vote of its term (as
  PySyncObj does, whoever sent it) against a majority of its own voter set;
- a new leader appends a no-op and commits only entries of its own term, by a majority of match
  indexes of its voter set (itself included); on a matching ``prevLogIdx`` a follower drops every
  entry after it (PySyncObj truncates unconditionally), appends the new ones and answers;
- membership changes (``add``/``remove`` entries) take effect when appended and are undone when
  truncated (the voter set is read from the log); the controller proposes them one at a time, only
  once its no-op committed and the previous change committed (PySyncObj 0.3.17 never sets its
  ``__changeClusterIDx``, so this rule is the controller's, not the library's);
- the network: a FIFO channel per directed link (TCP); a crash or a reset empties it; a partition holds
  messages back on chosen links (one-way ones too).

Storage identity (issue 24): a member is ``(node, storageId)``. A wipe destroys a store; the node comes
back with a new storageId as an observer (receives entries, never votes, never campaigns, never counts
toward commit) once a live peer holds the cluster; an admin removes the old identity and adds the new
one once the observer caught up, and the observer becomes a voter when it applies its own ``add``.
``identity_rule=False`` models the code before issue 24: a wiped node comes back as the same voter
with an empty store.

The state machine is one group's masterEpoch; a record "elect at expected + 1" applies by compare-and-set
(docs/raft.md §3). :class:`Cluster` records each invariant violation in ``violations`` when it happens."""

from __future__ import annotations

from dataclasses import dataclass, field

NODES = ("a", "b", "c")
Identity = tuple[str, int]  # (node, storageId)
Link = tuple[str, str]
INITIAL_EPOCH = 1


@dataclass(frozen=True)
class Entry:
    """One log entry; ``uid`` makes every appended entry distinct."""

    uid: int
    term: int
    kind: str  # "noop" | "elect" | "add" | "remove"
    member: Identity | None = None  # add/remove: who
    expected: int = 0  # elect: the masterEpoch it was decided against
    proposer: Identity | None = None


@dataclass(frozen=True)
class RequestVote:
    """``request_vote``."""

    term: int
    candidate: Identity
    last_index: int
    last_term: int


@dataclass(frozen=True)
class VoteReply:
    """``response_vote``."""

    term: int
    voter: Identity


@dataclass(frozen=True)
class AppendEntries:
    """``append_entries``."""

    term: int
    prev_index: int
    prev_term: int
    entries: tuple[Entry, ...]
    commit: int


@dataclass(frozen=True)
class AppendReply:
    """``next_node_idx``. PySyncObj sends no term and a leader takes any reply; ``term`` is only read
    with ``Cluster(ack_term_check=True)``, the textbook Raft rule."""

    term: int
    sender: Identity
    next_index: int
    success: bool
    reset: bool


Message = RequestVote | VoteReply | AppendEntries | AppendReply


@dataclass
class Store:
    """What a node's disk holds: identity, role and Raft's persisted state."""

    storage_id: int
    role: str  # "voter" | "observer"
    term: int = 0
    voted_for: Identity | None = None
    log: list[Entry] = field(default_factory=list)
    commit: int = 0

    def last_term(self) -> int:
        return self.log[-1].term if self.log else 0


@dataclass
class Node:
    """One controller process: its store (None once wiped) and its volatile Raft state."""

    name: str
    store: Store | None
    up: bool = True
    state: str = "follower"  # "follower" | "candidate" | "leader"
    votes: set[Identity] = field(default_factory=set)
    next_index: dict[str, int] = field(default_factory=dict)
    match: dict[Identity, int] = field(default_factory=dict)
    noop_index: int = 0
    applied: int = 0
    epoch: int = INITIAL_EPOCH
    waiting: set[int] = field(default_factory=set)  # uids of this incarnation's proposals

    @property
    def identity(self) -> Identity:
        assert self.store is not None
        return (self.name, self.store.storage_id)

    @property
    def alive(self) -> bool:
        return self.up and self.store is not None


def voter_set(log: list[Entry], bootstrap: frozenset[Identity]) -> set[Identity]:
    """The voter set a log defines: the bootstrap voters changed by every appended add/remove."""
    voters = set(bootstrap)
    for entry in log:
        if entry.member is not None and entry.kind in ("add", "remove"):
            (voters.add if entry.kind == "add" else voters.discard)(entry.member)
    return voters


class Cluster:
    """A 3-node controller group driven one action at a time; collects invariant violations."""

    def __init__(
        self, identity_rule: bool = True, ack_term_check: bool = False, one_disk_at_a_time: bool = True
    ) -> None:
        self.identity_rule = identity_rule
        self.one_disk_at_a_time = one_disk_at_a_time
        self.ack_term_check = ack_term_check
        self.nodes = {n: Node(n, Store(storage_id=0, role="voter")) for n in NODES}
        self.bootstrap = frozenset((n, 0) for n in NODES)
        self.channels: dict[Link, list[Message]] = {(s, d): [] for s in NODES for d in NODES if s != d}
        self.blocked: frozenset[Link] = frozenset()
        self.next_uid = 1
        self.next_storage_id = 1
        # Ground truth for the invariants.
        self.committed: dict[int, tuple[Entry, int]] = {}  # index -> (entry, term of the committing leader)
        self.applied_at: dict[int, Entry] = {}
        self.leaders: dict[int, Identity] = {}
        self.handed_out: list[int] = []
        self.violations: list[str] = []

    # -- actions ------------------------------------------------------------------------------------

    def timeout(self, name: str) -> None:
        """The election timeout fires: a voter campaigns; a leader falls back to follower."""
        node = self.nodes[name]
        if not node.alive or node.store is None or node.store.role != "voter":
            return
        if node.state == "leader":
            node.state = "follower"
            return
        store = node.store
        store.term += 1
        store.voted_for = node.identity
        node.state, node.votes = "candidate", {node.identity}
        request = RequestVote(store.term, node.identity, len(store.log), store.last_term())
        for other in NODES:
            if other != name:
                self._send(name, other, request)
        self._maybe_win(node)

    def heartbeat(self, name: str) -> None:
        """A leader sends AppendEntries to every other address, from each one's next index."""
        node = self.nodes[name]
        if not node.alive or node.state != "leader" or node.store is None:
            return
        store = node.store
        for other in NODES:
            if other == name:
                continue
            nxt = min(node.next_index.get(other, len(store.log) + 1), len(store.log) + 1)
            prev = nxt - 1
            prev_term = store.log[prev - 1].term if prev > 0 else 0
            entries = tuple(store.log[prev:])
            self._send(name, other, AppendEntries(store.term, prev, prev_term, entries, store.commit))
            node.next_index[other] = len(store.log) + 1

    def propose(self, name: str) -> None:
        """A self-believed leader decides "elect at masterEpoch + 1" against its applied state."""
        node = self.nodes[name]
        if node.alive and node.state == "leader":
            self._append(node, "elect", expected=node.epoch)

    def admin_remove(self, pick: int) -> None:
        """``removeControllerPeer`` (mqadmin finds the leader): drop a voter whose store no longer exists."""
        node = self._newest_leader()
        if node is None or not self._may_change_membership(node) or node.store is None:
            return
        live = {n.identity for n in self.nodes.values() if n.store is not None}
        gone = sorted(voter_set(node.store.log, self.bootstrap) - live)
        if gone:
            self._append(node, "remove", member=gone[pick % len(gone)])

    def admin_add(self, pick: int) -> None:
        """``addControllerPeer`` (mqadmin finds the leader): add an observer caught up to its commit index."""
        node = self._newest_leader()
        if node is None or not self._may_change_membership(node) or node.store is None:
            return
        voters = voter_set(node.store.log, self.bootstrap)
        ready = sorted(
            other.identity
            for other in self.nodes.values()
            if other.store is not None
            and other.store.role == "observer"
            and other.identity not in voters
            and node.match.get(other.identity, 0) >= node.store.commit
        )
        if ready:
            self._append(node, "add", member=ready[pick % len(ready)])

    def deliver(self, src: str, dst: str) -> None:
        """Deliver the oldest message on ``src -> dst`` unless the link is partitioned."""
        queue = self.channels[(src, dst)]
        if queue and (src, dst) not in self.blocked:
            self._receive(dst, src, queue.pop(0))

    def deliver_all(self) -> None:
        """One network round: every message in flight now, on every open link, in order."""
        for link, queue in self.channels.items():
            for _ in range(0 if link in self.blocked else len(queue)):
                if queue:
                    self._receive(link[1], link[0], queue.pop(0))

    def round(self) -> None:
        """Every leader heartbeats, then two network rounds (request and answer)."""
        for name in NODES:
            self.heartbeat(name)
        self.deliver_all()
        self.deliver_all()

    def reset(self, src: str, dst: str) -> None:
        """The TCP connection breaks: whatever was in flight on it is lost."""
        self.channels[(src, dst)].clear()

    def partition(self, blocked: frozenset[Link]) -> None:
        self.blocked = blocked  # one-way when only one direction of a pair is listed

    def heal(self) -> None:
        self.blocked = frozenset()

    def crash(self, name: str) -> None:
        """The process dies; its store stays; its connections are gone."""
        node = self.nodes[name]
        node.up = False
        node.state, node.votes, node.waiting = "follower", set(), set()
        for link, queue in self.channels.items():
            if name in link:
                queue.clear()

    def wipe(self, name: str) -> None:
        """The node is stopped (if up) and loses its store (term, vote, log, identity).

        ``one_disk_at_a_time`` (a minority): refused while another store is missing or not a voter
        again. Losing two of three makes the group unavailable (never wrong) and wastes the run.
        """
        node = self.nodes[name]
        others = [n.store for n in self.nodes.values() if n.name != name]
        lost = any(s is None or s.role != "voter" for s in others)
        if node.store is None or (lost and self.one_disk_at_a_time):
            return
        self.crash(name)
        if self.identity_rule:
            node.store = None
        else:
            node.store = Store(storage_id=node.store.storage_id, role="voter")

    def restart(self, name: str) -> None:
        """Start a crashed node. A blank store joins as an observer once a live peer holds the cluster."""
        node = self.nodes[name]
        if node.up and node.store is not None:
            return
        if node.store is None:
            if not any(n.alive for n in self.nodes.values() if n.name != name):
                return  # a blank store waits for a peer that knows the cluster
            node.store = Store(storage_id=self.next_storage_id, role="observer")
            self.next_storage_id += 1
        node.up, node.state, node.votes, node.waiting = True, "follower", set(), set()
        node.next_index, node.match = {}, {}
        node.applied, node.epoch = 0, INITIAL_EPOCH
        self._apply(node)

    # -- Raft ----------------------------------------------------------------------------------------

    def _send(self, src: str, dst: str, message: Message) -> None:
        if self.nodes[dst].up:
            self.channels[(src, dst)].append(message)

    def _receive(self, name: str, src: str, message: Message) -> None:
        node = self.nodes[name]
        if not node.alive:
            return
        if isinstance(message, RequestVote):
            self._on_request_vote(node, src, message)
        elif isinstance(message, VoteReply):
            if node.state == "candidate" and node.store is not None and message.term == node.store.term:
                node.votes.add(message.voter)
                self._maybe_win(node)
        elif isinstance(message, AppendEntries):
            self._on_append_entries(node, src, message)
        else:
            self._on_append_reply(node, src, message)

    def _on_request_vote(self, node: Node, src: str, message: RequestVote) -> None:
        store = node.store
        if store is None or store.role != "voter":
            return  # an observer never votes
        if message.term > store.term:
            store.term, store.voted_for = message.term, None
            node.state = "follower"
        if node.state == "leader" or message.term < store.term:
            return
        if (message.last_term, message.last_index) < (store.last_term(), len(store.log)):
            return
        if store.voted_for is not None:
            return
        store.voted_for = message.candidate
        self._send(node.name, src, VoteReply(message.term, node.identity))

    def _maybe_win(self, node: Node) -> None:
        assert node.store is not None
        others = voter_set(node.store.log, self.bootstrap) - {node.identity}
        if len(node.votes) <= (len(others) + 1) / 2:
            return
        store = node.store
        node.state, node.match, node.votes = "leader", {}, set()
        node.next_index = {other: len(store.log) + 1 for other in NODES}
        holder = self.leaders.setdefault(store.term, node.identity)
        if holder != node.identity:
            self._violate(f"two leaders in term {store.term}: {holder} and {node.identity}")
        node.noop_index = self._append(node, "noop")
        self.heartbeat(node.name)

    def _append(self, node: Node, kind: str, member: Identity | None = None, expected: int = 0) -> int:
        assert node.store is not None
        entry = Entry(self.next_uid, node.store.term, kind, member, expected, node.identity)
        self.next_uid += 1
        node.store.log.append(entry)
        node.waiting.add(entry.uid)
        self._advance_commit(node)
        return len(node.store.log)

    def _on_append_entries(self, node: Node, src: str, message: AppendEntries) -> None:
        store = node.store
        assert store is not None
        if message.term < store.term:
            return  # PySyncObj ignores it without an answer
        if message.term > store.term:
            store.term, store.voted_for = message.term, None
        node.state = "follower"
        prev = message.prev_index
        if prev > len(store.log):
            self._send(
                node.name, src, AppendReply(message.term, node.identity, len(store.log) + 1, False, True)
            )
            return
        if prev > 0 and store.log[prev - 1].term != message.prev_term:
            self._send(node.name, src, AppendReply(message.term, node.identity, prev, False, True))
            return
        applied = store.log[prev : node.applied]  # PySyncObj re-adds what it truncates: same is harmless
        del store.log[prev:]
        store.log.extend(message.entries)
        if store.log[prev : node.applied] != applied:
            self._violate(f"{node.identity} replaces applied entries from {prev + 1}")
        store.commit = min(store.commit, len(store.log))
        if message.commit > store.commit:
            store.commit = min(message.commit, len(store.log))
        self._send(node.name, src, AppendReply(message.term, node.identity, len(store.log) + 1, True, False))
        self._check_commits(node)
        self._apply(node)

    def _on_append_reply(self, node: Node, src: str, message: AppendReply) -> None:
        store = node.store
        if node.state != "leader" or store is None:
            return
        if self.ack_term_check and message.term != store.term:
            return
        if message.reset:
            node.next_index[src] = message.next_index
        if message.success and node.match.get(message.sender, 0) < message.next_index - 1:
            node.match[message.sender] = message.next_index - 1
            node.next_index[src] = max(node.next_index.get(src, 0), message.next_index)  # P20
        self._advance_commit(node)

    def _advance_commit(self, node: Node) -> None:
        store = node.store
        if node.state != "leader" or store is None:
            return
        others = voter_set(store.log, self.bootstrap) - {node.identity}
        new_commit = index = store.commit
        while index < len(store.log):
            index += 1
            count = 1 + sum(1 for m in others if node.match.get(m, 0) >= index)
            if count <= (len(others) + 1) / 2:
                break
            if store.log[index - 1].term == store.term:
                new_commit = index
        if new_commit > store.commit:
            for i in range(store.commit + 1, new_commit + 1):
                self.committed.setdefault(i, (store.log[i - 1], store.term))
            store.commit = new_commit
        self._check_commits(node)
        self._apply(node)

    def _newest_leader(self) -> Node | None:
        leaders = [n for n in self.nodes.values() if n.alive and n.state == "leader" and n.store is not None]
        return max(leaders, key=lambda n: n.store.term if n.store else 0, default=None)

    def _may_change_membership(self, node: Node) -> bool:
        store = node.store
        if not node.alive or node.state != "leader" or store is None or store.commit < node.noop_index:
            return False
        last_change = max((i for i, e in enumerate(store.log, 1) if e.kind in ("add", "remove")), default=0)
        return last_change <= store.commit

    def _apply(self, node: Node) -> None:
        store = node.store
        assert store is not None
        while node.applied < store.commit:
            node.applied += 1
            entry = store.log[node.applied - 1]
            seen = self.applied_at.setdefault(node.applied, entry)
            if seen != entry:
                self._violate(
                    f"{node.identity} applies {entry} at {node.applied}, another node applied {seen}"
                )
            if entry.kind == "elect" and entry.expected == node.epoch:
                node.epoch += 1
                if entry.uid in node.waiting:  # the proposer answers its client
                    if node.epoch in self.handed_out:
                        self._violate(f"masterEpoch {node.epoch} handed out twice")
                    self.handed_out.append(node.epoch)
            if entry.kind == "add" and entry.member == node.identity and store.role == "observer":
                store.role = "voter"
            node.waiting.discard(entry.uid)

    # -- invariants ---------------------------------------------------------------------------------

    def _violate(self, text: str) -> None:
        self.violations.append(text)

    def _check_commits(self, node: Node) -> None:
        store = node.store
        assert store is not None
        for i in range(1, store.commit + 1):
            known = self.committed.get(i)
            if known is not None and known[0] != store.log[i - 1]:
                self._violate(f"{node.identity} commits {store.log[i - 1]} at {i}, committed was {known[0]}")

    def check(self) -> list[str]:
        """Check the invariants that hold between steps; return every violation so far."""
        for node in self.nodes.values():
            if not node.alive or node.state != "leader" or node.store is None:
                continue
            log = node.store.log
            for index, (entry, term) in self.committed.items():
                if term < node.store.term and (index > len(log) or log[index - 1] != entry):
                    self._violate(
                        f"leader {node.identity} of term {node.store.term} lacks entry {index} "
                        f"committed in term {term}"
                    )
        return self.violations


Action = tuple  # ("timeout", "a"), ("deliver", "a", "b"), ("partition", frozenset(links)), ("heal",), ...


def run(cluster: Cluster, actions: list[Action]) -> list[str]:
    """Play ``actions`` in order, checking the invariants after each; stop at the first violation."""
    for action in actions:
        getattr(cluster, action[0])(*action[1:])
        if cluster.check():
            break
    return cluster.violations

"""A deterministic whole-cluster simulator (TigerBeetle-style): the real cores, only IO simulated.

A seed decides everything: the cluster's config, the faults (crash, pause, partition, power loss,
disk wipe, controller crash, message loss, reordering) and every interleaving. After every step the
invariants of ``invariants`` are checked; a failing seed prints its trace and replays exactly
(``python -m mqha.sim --seed N``).

Production code it runs (``docs/architecture.md`` §11 has the map):

- controller: ``operations.handle_*`` (apply-id, register, elect, alter, replica-info, next-id),
  ``apply.apply_encoded`` and the record codec, ``replies.reply_from_outcome``, ``ElectionPolicy``
  (``election.whom.elect``), ``after_election``, ``after_alter_sync_state_set``, ``ElectionWaits``,
  ``HeartbeatTable``, ``broker_claims.handle_claim``;
- broker control plane: ``ReplicasPlanner`` (register flow, role flow, SyncStateSet upkeep);
- HA: ``MasterConnection`` / ``SlaveConnection`` (frames, handshake, ``decide_truncation``),
  ``SyncStateSetKeeper`` / ``InSyncState``, ``SlaveLinks``, ``AckGate`` (confirm offset,
  ``countable_acks``, ``in_sync_refusal``), ``replica_ack_status``, ``EligibleRelease``,
  ``HARoleSwitch`` (the epoch file on a role change), ``BrokerRole``, ``EpochHistory``.

Modelled, not run: Raft (an ordered committed log, a leader's un-committed tail lost on a leader
change), the sockets, the disk (``storage``), and the shells' glue (the put path's waiting, the
controller's write path and liveness scans), restated in a few lines each.
"""

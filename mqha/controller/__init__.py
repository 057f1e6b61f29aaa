"""The controller: one node of the Raft-replicated group that owns every broker set's master, master
epoch, SyncStateSet and broker ids (``mqcontroller``; docs/architecture.md §3).

Cores decide: ``operations`` (one ``handle_*`` per API: state, request, liveness -> records and a
reply), ``election`` (whom to elect, and when; §3.2), ``apply`` (the only place the replicated
``state`` changes), ``topics``, ``consumer_offsets``, ``acls``, ``liveness``, ``access``. Shells carry
out: ``raft/`` (PySyncObj as an explicit layer, docs/raft.md), ``applier``, ``write_path`` (leader-only
writes), ``liveness_watch`` (heartbeats, expiry, the elections they trigger), ``sessions``,
``role_changes``, ``http_api`` and its route modules, ``service`` (composes the jobs) and ``__main__``.
"""

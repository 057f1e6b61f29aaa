"""Master/slave replication between the replicas of one broker set (RocketMQ's AutoSwitchHAService;
docs/reference-behaviour.md §10-§15, docs/architecture.md §4).

Sans-IO cores: ``frames`` (the HA wire codec), ``state``, ``master`` and ``slave`` (one connection's
two ends, with the epoch handshake that truncates a slave to the consistent point), ``batching``,
``ack`` (confirm offset and the put's replica-ack rule), ``sync_state_set`` (shrink and expand),
``auth``. Asyncio shells: ``server`` and ``client`` (the sockets), ``links``, ``keeper`` (the master's
SyncStateSet), ``gate`` (``AckGate``, the put path's questions), ``roles`` and ``service``.
"""

"""The broker's agent at the controllers (RocketMQ's ReplicasManager; docs/reference-behaviour.md §9,
§10): registration, broker ids, heartbeats, role changes and SyncStateSet reports.

``planner`` is a pure state machine (with ``planner_states``, ``register_flow``, ``role_flow``,
``sync_state_set_upkeep``) that turns inputs into ``actions``; ``runner`` (``ReplicasManager``) feeds it
and carries the actions out in phase order (persist, send, apply) through ``client``,
``heartbeat_sessions`` and the broker's ``hooks`` (the contract the broker implements).
"""

"""The broker: one replica of a broker set, serving puts and reads over its commit log (``mqbroker``;
docs/architecture.md §4).

``commitlog/`` is the segmented log on disk; ``store`` puts it together with the epoch file and the
confirm-offset checkpoint; ``access`` holds the client put and read paths (with the HA layer's
``AckGate``); ``server`` and ``put_stream`` serve the HTTP API; ``hooks_impl`` carries out the
ReplicasManager's decisions and is the one writer of ``mqha.role.BrokerRole``; ``retention`` (core) and
``retention_task`` delete old segments; ``integrity`` scrubs and repairs damaged records; ``__main__``
builds the parts in order. Its components are ``mqha.replicas_manager`` and ``mqha.autoswitch_ha``.
"""

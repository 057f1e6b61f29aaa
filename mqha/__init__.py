"""mqha: RocketMQ 5 controller-mode high availability in Python.

The one import root. Its modules ``ids``, ``codes``, ``errors``, ``config``, ``clock``, ``extras``
and the ``wire`` package are the shared kernel (core code that imports nothing else of ours); the
subpackages are the controller, the broker and its replication, the client, mqadmin, the runtime
history and the offline tools (docs/architecture.md §2).
"""

__version__ = "0.1.0"

"""``mqadmin``: the admin CLI with RocketMQ's command names and options (docs/architecture.md §6).

``commands/`` is the pure part (commands as data, argument -> HTTP call, reply -> text or JSON, exit
statuses); ``__main__`` and the ``brokers``, ``topics``, ``voters`` and ``acl`` shells parse the command
line and make the calls through ``mqha.controller_client``.
"""

"""``mqha chaos``: a local cluster under load, a seeded fault schedule and a verdict
(docs/architecture.md §5).

Cores: ``schedule`` (which fault when, from the seed), ``links``, ``netfilter``, ``verdict``,
``client_checks``, ``declared``, ``agreement``. Shells: ``runner`` (a run), ``proxy`` (the per-link
TCP fault proxy), one module per fault kind (``power_cuts``, ``bitflips``, ``clones``, ``disk_fill``,
``network_faults``, ``clock_faults``, ...), the run's workloads and ``cli``.
"""

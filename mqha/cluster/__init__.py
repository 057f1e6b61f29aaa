"""Local clusters of real processes on 127.0.0.1: ``mqha cluster``, ``mqha demo`` and the tests' and
chaos runs' clusters (docs/architecture.md §1).

``local`` (``LocalCluster``) lays out the run directory and configs and starts the nodes by pid;
``workload``, ``recovery`` and ``failover`` produce under a master kill and measure the gap; ``demo`` is
``mqha demo``; ``checking`` ends a recorded run with the no-loss check; ``commands`` is the CLI.
"""

"""``mqha bench``: side-by-side benchmarks of the controller, failover, replication, puts and scale,
with the figures of docs/performance.md.

One module per benchmark (``controller``, ``failover``, ``replication``, ``put``, ``scale``, ``auth``),
``loadgen`` and ``lean_http`` (the closed-loop load generator and its HTTP/1.1 client), ``report``
(pure: percentiles, ratios, tables) and ``cli``.
"""

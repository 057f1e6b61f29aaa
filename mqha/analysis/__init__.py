"""The offline no-loss proof (``mqha export``, ``mqha analyze``; docs/architecture.md §5).

``invariants`` states each invariant once as a pure function over history rows; ``export`` and
``network_export`` gather every node's history and final log; ``spark_tables``, ``spark_checks`` and
``spark_job`` check them with PySpark (or the pure engine); ``report`` writes ``verdict.json`` and
``report.html``. No runtime process imports this package (the ``runtime-offline`` import contract).
"""

"""Runtime history: what each controller, broker and client did, recorded as it happens.

``schema`` fixes the tables (docs/architecture.md §5); ``recorder`` writes them to each process's
SQLite database. Runtime processes import this package; the offline proof (``mqha.analysis``) reads
what it wrote and is never imported by a runtime process.
"""

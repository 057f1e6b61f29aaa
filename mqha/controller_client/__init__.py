"""Following the controllers' Raft leader: a pure policy (``policy``) and its asyncio shell (``caller``),
used by every controller client (docs/architecture.md §2.3)."""

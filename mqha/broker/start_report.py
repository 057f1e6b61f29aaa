"""How this broker process started (pure). Minimal version from the HA side of issue 25: only the
incarnation; the recovery half of the start report (``StartReport``) is added with the controller's
election work.
"""

from __future__ import annotations

import secrets


def new_incarnation() -> str:
    """A fresh incarnation for one broker process: 16 random bytes as 32 lowercase hex digits. The HA
    client announces it on every connection to a master (docs/architecture.md §8.5)."""
    return secrets.token_hex(16)

"""The election rule of docs/architecture.md §3.2, one pure core (no clock, no IO, no threads).

- ``whom``: whom to elect, or whom the set waits for (``ElectionInputs`` -> ``ElectionResult``);
- ``policy``: those inputs gathered from the replicated state and a frozen liveness view.

The shells (``write_path``, ``liveness_watch``) only gather inputs and carry out what the core returns.
"""

from mqha.controller.election.policy import ElectionPolicy, election_watermark
from mqha.controller.election.whom import (
    NO_CANDIDATE,
    UNKNOWABLE,
    WAIT_FOREVER,
    ElectionInputs,
    ElectionResult,
    elect,
    rank_key,
)

__all__ = [
    "NO_CANDIDATE",
    "UNKNOWABLE",
    "WAIT_FOREVER",
    "ElectionInputs",
    "ElectionPolicy",
    "ElectionResult",
    "elect",
    "election_watermark",
    "rank_key",
]

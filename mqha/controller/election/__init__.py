"""The election rule of docs/architecture.md §3.2, one pure core (no clock, no IO, no threads).

- ``when``: what this node saw -> whether the serving leader elects (``needs_election`` over the
  ``TRANSITIONS`` table);
- ``whom``: whom to elect, or whom the set waits for (``ElectionInputs`` -> ``ElectionResult``);
- ``policy``: those inputs gathered from the replicated state and a frozen liveness view;
- ``after``: what an attempt writes and answers (``VERDICTS``) and what this node then remembers and
  pushes (``after_election``, ``after_alter_sync_state_set``).

The shells (``write_path``, ``liveness_watch``) only gather inputs and carry out what the core returns;
``operations.handle_elect_master`` turns a verdict into records and a reply.
"""

from mqha.controller.election.after import (
    VERDICTS,
    AfterAlter,
    AfterElection,
    Asker,
    ElectionOutcome,
    Found,
    Verdict,
    Waiting,
    after_alter_sync_state_set,
    after_election,
    asker,
    attempt_verdict,
    found,
    joined_incarnations,
)
from mqha.controller.election.policy import ElectionPolicy, election_watermark
from mqha.controller.election.when import (
    TRANSITIONS,
    Event,
    SetState,
    Then,
    gone_event,
    heartbeat_event,
    is_new_process,
    needs_election,
    restart_keeps_master,
    scan_event,
    set_state,
)
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
    "TRANSITIONS",
    "UNKNOWABLE",
    "VERDICTS",
    "WAIT_FOREVER",
    "AfterAlter",
    "AfterElection",
    "Asker",
    "ElectionInputs",
    "ElectionOutcome",
    "ElectionPolicy",
    "ElectionResult",
    "Event",
    "Found",
    "SetState",
    "Then",
    "Verdict",
    "Waiting",
    "after_alter_sync_state_set",
    "after_election",
    "asker",
    "attempt_verdict",
    "elect",
    "election_watermark",
    "found",
    "gone_event",
    "heartbeat_event",
    "is_new_process",
    "joined_incarnations",
    "needs_election",
    "rank_key",
    "restart_keeps_master",
    "scan_event",
    "set_state",
]

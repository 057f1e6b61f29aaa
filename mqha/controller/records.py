"""Log records of the controller: self-describing deltas with a schema version (docs/architecture.md §11 rules
4, 7).

A record says what changes and what it was decided against; ``mqha.controller.apply`` checks that
(compare-and-set) and alone bumps the epochs. Which expectation each record carries:

| record                      | CAS at apply time                                              |
|-----------------------------|----------------------------------------------------------------|
| ApplyBrokerIdRecord         | the id is free, or held with the same register check code      |
| UpdateBrokerAddressRecord   | the set and the id are still registered                        |
| ElectMasterRecord           | masterEpoch and syncStateSetEpoch equal the expected ones      |
| AlterSyncStateSetRecord     | master id, masterEpoch, syncStateSetEpoch equal the expected   |
| CleanBrokerDataRecord       | masterEpoch and syncStateSetEpoch equal the expected ones      |
| UpdateTopicRecord           | nothing (sets the named sets' queues; the last write wins)    |
| DeleteTopicRecord           | nothing (removes the named sets' queues; idempotent)           |
| NoopRecord                  | nothing (a new leader's barrier)                               |

The first two never touch an epoch (nor do the topic records, which touch no broker set), so they do
not carry any: fencing them on epochs would only
reject a registration that raced with an unrelated election.

The records are wire structs: their shape and encoding live in ``mqha.wire.records`` (docs/architecture.md
§8), re-exported here under the names the controller has always used.
"""

from mqha.wire import records as _wire_records
from mqha.wire.records import *  # noqa: F403 (the wire structs under their old home)

__all__ = _wire_records.__all__

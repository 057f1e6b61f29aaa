"""Authentication: the credentials of the config keys, request signatures with a replay window, HTTP
Basic users and the HA port's challenge proofs (docs/architecture.md §12). Pure: no sockets, no clocks;
the shells pass the time and the random nonces in."""

"""mqproxy: RocketMQ 5's gRPC v2 ``MessagingService`` in front of mqha's broker groups
(docs/architecture.md §13)."""

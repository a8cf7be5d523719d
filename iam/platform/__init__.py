"""What every app's services use, HTTP or not: the audit log, events and the outbox, caches,
row counts, metrics, the request context, cryptography, retention, the statement timeout, the client
address and the egress guard for outbound requests."""

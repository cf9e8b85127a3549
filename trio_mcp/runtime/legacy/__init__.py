"""2025-11-25 sessions: the session table, the legacy endpoint, the session (a supervisor
task), its handlers, its outgoing stream and log, its subscriptions and its statistics."""

"""What an operator looks through: the inspector (its page and event stream) and the
counters (/stats, /metrics), on side ports of their own."""

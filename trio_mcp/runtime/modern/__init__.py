"""2026-07-28 requests: the exchange of one request, the envelope's port, listen streams,
and the SSE stream that keeps nothing."""

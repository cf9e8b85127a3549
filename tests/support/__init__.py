"""Shared test helpers: live servers, raw HTTP clients, SSE parsing."""

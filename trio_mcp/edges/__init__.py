"""The HTTP edges: trio-mcp's own HTTP/1.1 server, the ASGI adapter and hypercorn, and
serving them; they carry out protocol._edge's decisions and hand requests to the runtime."""

"""What every layer above the protocol takes: the settings (ServerConfig), the ports the
user API and the runtime meet at, the trace records, and the process's allocator and
collector choices."""

"""Workers sharing an endpoint: the store contract and its implementations (Redis, in
process), the cluster that exists only with a shared store, stream copies, relays, orphan
resumes and tasks across workers."""

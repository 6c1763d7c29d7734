"""HTTP clients: replica pools, retries, routing."""

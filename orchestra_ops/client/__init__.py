"""HTTP clients for the fleet: replica pools, bounded retries, explicit routing.

    Routing (routing.py)      role -> Target (a declared model's replicas, or a declared provider)
    FleetClient (fleet_client.py)  one ModelClient per target in use; `fleet.chat(role, messages)`
    ModelClient (chat.py)     request_defaults merged, max_model_len checked, bounded retries
    ReplicaPool (pool.py)     least outstanding requests, per-replica cap, ejection + background probe
    SessionAffinity (affinity.py)  a session's calls on one replica: consistent hashing with bounded loads
    Transport (transport.py)  the one seam that touches the network (keep-alive HTTP/1.1 per replica, http1.py)

Every failure a caller sees is a CallError (an EvalError) with a short `kind` such as `http_400`,
`context_length`, `timeout`, `connection`, `no_replica` or `prompt_too_long`.
"""

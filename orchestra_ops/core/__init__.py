"""What every wing stands on: the state folder (paths), safe file writes (fsutil), secret redaction
(redact), processes and ports (procs) and reading process logs (logtail). Imports nothing of orchestra_ops
but errors.py."""

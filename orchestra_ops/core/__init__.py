"""What every wing stands on: the state folder (paths), safe file writes (fsutil), secret redaction
(redact), processes and ports (procs), reading process logs (logtail) and the summary statistics of
latencies (stats). Imports nothing of orchestra_ops but errors.py."""

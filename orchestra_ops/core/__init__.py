"""What every wing stands on: the state folder (paths), safe file writes (fsutil), secret redaction
(redact), processes and ports (procs), reading process logs (logtail), the summary statistics of
latencies (stats) and `did you mean …?` for a mistyped name (suggest).
Imports nothing of orchestra_ops but errors.py."""

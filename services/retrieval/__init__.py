"""The micro-batching retrieval server (`ops serve retrieval`, `ops index build`)."""

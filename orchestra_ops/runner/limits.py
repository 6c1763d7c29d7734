"""The open-file limit: raise the soft limit to the hard one, refuse a concurrency it cannot carry.

Each task in flight holds one connection; the aiohttp connector of a replica never keeps more
sockets (busy + idle) than the most it had busy at once, so `concurrency` sockets cover the
connections. On top come one probe socket per replica and RESERVED_FDS for the run's files, the
interpreter and the event loop.
"""

from __future__ import annotations

import logging
import resource

from orchestra_ops.errors import ConfigError

log = logging.getLogger(__name__)

RESERVED_FDS = 64
UNLIMITED_FALLBACK = 1 << 20


def raise_open_file_limit() -> tuple[int, int]:
    """Set the soft RLIMIT_NOFILE to the hard limit; return (soft, hard) as they are afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else UNLIMITED_FALLBACK
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, target, exc)
        return soft, hard
    log.info("open-file limit raised from %d to %d", soft, target)
    return target, hard


def files_needed(concurrency: int, replicas: int) -> int:
    return concurrency + replicas + RESERVED_FDS


def check_concurrency(concurrency: int, replicas: int, soft: int, hard: int) -> None:
    """A ConfigError with the numbers when `concurrency` cannot fit the open-file limit."""
    needed = files_needed(concurrency, replicas)
    if soft == resource.RLIM_INFINITY or needed <= soft:
        return
    most = max(1, soft - replicas - RESERVED_FDS)
    raise ConfigError(
        f"--concurrency {concurrency} needs about {needed} open files ({concurrency} connections + {replicas} "
        f"replica probes + {RESERVED_FDS} for logs and the runtime), but this process may open only {soft} "
        f"(hard limit {hard}); use --concurrency {most} or less, or raise the hard limit "
        "(ulimit -Hn; LimitNOFILE= for a systemd unit; /etc/security/limits.conf)")

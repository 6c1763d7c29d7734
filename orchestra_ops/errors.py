"""The one exception tree of orchestra-ops.

Every error the library raises on purpose is an OpsError; the CLI maps each class to an exit code
and prints its message (no traceback)::

    OpsError                      exit 1   anything else we expected and can explain
    ├── ConfigError               exit 2   bad input: topology, dataset, flags, endpoints file
    │   └── TopologyError         exit 2   a topology file that does not validate (one line per problem)
    ├── StateError                exit 2   no fleet is up / state file unreadable
    ├── LaunchError               exit 3   a process would not start, a port is taken
    │   ├── ReadinessError        exit 3   a process died or timed out before serving
    │   ├── Unreachable           exit 3   a server a command needs does not answer (a tracking server)
    │   └── FleetUnavailable      exit 3   every replica of a model the run calls is down: stopped, resumable
    ├── EvalError                 exit 4   an eval could not run or finish
    │   └── DiskFull              exit 4   ENOSPC/EDQUOT writing the run dir: stopped, resumable
    ├── SpendLimit                exit 5   the run dir's spend passed --max-cost: stopped, resumable with a higher one
    ├── Inconclusive              exit 6   `ops posttrain`: the evidence decides neither pass nor block
    ├── RunTimeout                exit 124 a run hit its wall-clock limit (what finished is kept; rerun resumes)
    └── Interrupted               exit 130 Ctrl-C, after a clean shutdown
"""

from __future__ import annotations

import os
from collections.abc import Sequence


class OpsError(Exception):
    """Base of every error orchestra-ops raises on purpose."""

    exit_code = 1


class ConfigError(OpsError):
    """Bad input: a file, field, flag or id that the user can fix."""

    exit_code = 2


class TopologyError(ConfigError):
    """A topology file that does not validate; carries one `FILE:LINE: path: message` per problem."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class StateError(OpsError):
    """No fleet state where one is needed, or a state file that cannot be read."""

    exit_code = 2


class LaunchError(OpsError):
    """A process could not be started (port taken, backend failure)."""

    exit_code = 3


class ReadinessError(LaunchError):
    """A process died, logged a fatal line, or timed out before it was serving."""


class Unreachable(LaunchError):
    """A server the command needs (a tracking server) refused the connection or did not answer in time."""


class FleetUnavailable(LaunchError):
    """Every replica of a model the run calls is down (at the start, or for the pool's wait mid-run): the
    run stopped without recording the units it could not run; `models` names the models that are down."""

    def __init__(self, message: str, models: Sequence[str]) -> None:
        super().__init__(message)
        self.models = list(models)


class EvalError(OpsError):
    """An eval could not run or finish."""

    exit_code = 4


class DiskFull(EvalError):
    """No space (or quota) left for a file of the run dir; the run stopped cleanly and can resume."""

    def __init__(self, path: str | os.PathLike[str], error: OSError) -> None:
        self.path = str(path)
        self.reason = os.strerror(error.errno) if error.errno else str(error)
        super().__init__(f"{self.path}: {self.reason.lower()}; the run stopped (no new tasks; tasks whose "
                         "result could not be written stay missing, not failed): free space, then --resume")


class Inconclusive(OpsError):
    """A posttrain verdict the evidence does not decide: the interval holds -max_drop (more samples would tell)."""

    exit_code = 6
class SpendLimit(OpsError):
    """The run dir's total spend (every call of every attempt, priced from the topology) passed --max-cost:
    the run took no more tasks; what finished is kept, and a resume with a higher limit goes on."""

    exit_code = 5


class RunTimeout(OpsError):
    """A run reached its wall-clock limit; everything that finished is stored, so a rerun resumes."""

    exit_code = 124


class Interrupted(OpsError):
    """The user pressed Ctrl-C; raised after in-flight work was flushed."""

    exit_code = 130

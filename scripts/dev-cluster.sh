#!/usr/bin/env bash
# A cluster on this machine to try the slurm and ssh backends (needs root and `make setup`):
#   scripts/dev-cluster.sh up [DIR]      munged + slurmctld + slurmd (one node, 4 fake GPUs, partition dev)
#                                        and an sshd on 127.0.0.2:2222 with a generated key, all under DIR
#                                        (default .dev-cluster/); prints what to export
#   scripts/dev-cluster.sh status [DIR]  which daemons run
#   scripts/dev-cluster.sh down [DIR]    cancels the cluster's jobs, stops each daemon by its pid
# Then: topologies/slurm_local.yaml and topologies/ssh_local.yaml. Ports: DEV_SSH_PORT (2222),
# DEV_SLURMCTLD_PORT (16817), DEV_SLURMD_PORT (16818). Nothing under /etc is touched.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  echo "run \`make setup\` first" >&2
  exit 2
fi
exec .venv/bin/python -m tests.devcluster "$@"

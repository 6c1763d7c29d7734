#!/usr/bin/env bash
# Installs the system packages the tests use (tmux, slurm, munge, sshd, bubblewrap for the sandbox, and
# headless chromium for the report test), when run as root and when they are missing. Nothing starts at
# install; the tests start what they need themselves.
set -euo pipefail
need=()
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || need+=(munge)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v chromium >/dev/null 2>&1 || need+=(chromium fonts-dejavu-core)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)  # the sandbox of model-written code (no network)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "note: not root; cannot install ${need[*]} (tests that need them will be skipped)" >&2
  exit 0
fi
echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null

"""Backends that start and stop processes: local, tmux, ssh, slurm."""

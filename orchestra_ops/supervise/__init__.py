"""Long runs away from the terminal: `ops eval --detach` (detach.py) starts a supervisor (supervisor.py) in a
tmux server of the run's own or an sbatch job, which reruns the eval with --resume after a crash and
requeues before a SLURM time limit; `ops runs`, `ops stop` and `ops attach` read and steer it (runs.py)."""

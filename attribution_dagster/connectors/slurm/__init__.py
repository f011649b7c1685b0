"""Slurm scheduler: sacct / scontrol and slurmrestd."""

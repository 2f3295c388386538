"""Unit constants for resource requests, with XManager's names (``xm.GiB``, ``xm.vCPU``)."""

vCPU = 1.0

KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12
PB = 10**15

KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40
PiB = 2**50

# Durations in seconds (lxm3's units: ``walltime=10 * xm.Min``).
Sec = 1
Min = 60
Hr = 60 * 60

__all__ = ["GB", "KB", "MB", "PB", "TB", "GiB", "Hr", "KiB", "MiB", "Min", "PiB", "Sec", "TiB", "vCPU"]

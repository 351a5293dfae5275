"""A v1 taskset in a ``src/``-layout package: ``src/vf_v1_src/``, importing its own module by absolute name."""

from vf_v1_src.taskset import SumTaskset

__all__ = ["SumTaskset"]

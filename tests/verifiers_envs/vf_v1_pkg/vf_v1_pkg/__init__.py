"""A v1 taskset package the way verifiers' environments/ lay one out: the package re-exports its taskset
through an absolute import of itself, and the taskset imports a sibling module by absolute name."""

from vf_v1_pkg.taskset import WordTaskset

__all__ = ["WordTaskset"]

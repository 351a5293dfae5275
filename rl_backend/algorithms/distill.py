"""Distillation: the signal is a frozen model's (or the demonstration-conditioned policy's) view of the tokens."""

from __future__ import annotations

from collections.abc import Sequence

from rl_backend.algorithms.base import Algorithm, Trace


class OPD(Algorithm):
    """On-policy distillation: the policy samples; each sampled token's reverse KL to a frozen teacher,
    ``log p_teacher - log p_policy``, is its signal (the ``ref_kl`` component). No advantages. The teacher's
    log-probabilities come from :mod:`rl_backend.teacher` (an endpoint's ``prompt_logprobs``, or a local model)."""

    name = "opd"
    paper = "Thinking Machines, On-Policy Distillation (2025); Agarwal et al. 2024, GKD (arXiv:2306.13649)"
    action_component = "ref_kl"
    group_relative = False

    def credit(self, group: Sequence[Trace]) -> None:
        return None


class OPSD(OPD):
    """On-policy self-distillation (SDFT): the reference is the policy itself, at the weights the step starts from,
    reading the task's demonstration (``demo_key``: the example's ``info`` field, else its row's, e.g. ``answer``)
    in a system message before the sample (prime-rl's hint block); the reverse KL to it is the signal
    (``ref_kl``). No advantages. The trainer scores it (:meth:`rl_backend.policy.Policy.self_reference`)."""

    name = "opsd"
    paper = "SDFT (arXiv:2601.19897)"


class SFTDistill(Algorithm):
    """Hard distillation: a frozen teacher (``sampling.source``) samples the rollouts
    (:mod:`rl_backend.teacher_sampler`); the policy trains with cross-entropy on its tokens (``ce``), every
    sampled token at weight 1. No advantages; the rewards of the teacher's rollouts are still scored and logged."""

    name = "sft"
    paper = "Hinton et al. 2015 (distillation); Kim & Rush 2016, sequence-level KD (arXiv:1606.07947)"
    action_component = "ce"
    group_relative = False

    def credit(self, group: Sequence[Trace]) -> None:
        return None

"""``[algo]``: which training algorithm (:mod:`rl_backend.algorithms`) and its own settings; per ``[[env]]`` too.

prime-rl's ``[orchestrator.algo]`` and a ``[[orchestrator.train.source]]``'s ``algo`` are read as this table
(:mod:`rl_backend.config_shapes`). One flat table: a key that belongs to another algorithm is an error naming
the algorithm it belongs to. Imports no torch.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

AlgoType = Literal["grpo", "max_rl", "rae", "hierarchical_grpo", "opd", "sft", "opsd", "echo"]
EchoRole = Literal["system", "user", "assistant", "tool"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class LengthPenaltyConfig(_Strict):
    """A linear penalty subtracted from each reward before the baseline (``grpo``, ``echo``): the group's mean
    reward times the weighted sum of output tokens, input tokens and turns, each over the group's maximum."""

    type: Literal["linear"] = "linear"
    """The only kind (prime-rl's)."""
    num_output_tokens_weight: float = Field(0.25, ge=0)
    """Weight of the rollout's generated tokens over the group's most; 0 turns the term off."""
    num_input_tokens_weight: float = Field(0.1, ge=0)
    """Weight of the tokens it conditioned on but did not generate (prompt, tool and user turns)."""
    num_turns_weight: float = Field(0.1, ge=0)
    """Weight of its number of model turns."""


class FrozenModelConfig(_Strict):
    """A frozen model behind an OpenAI-compatible endpoint (prime-rl's ``FrozenModelConfig``), or, without
    ``base_url``, a local model or checkpoint folder that primekit loads and scores in-process."""

    name: str
    """The served model name, sent as ``model``; without ``base_url``, a model name or folder to load."""
    base_url: str | None = None
    """The endpoint, e.g. ``http://localhost:8001/v1`` (prime-rl requires one; unset: ``name`` is loaded here)."""
    api_key_var: str | None = None
    """The environment variable holding its key (never the key itself)."""


class AlgoSamplingConfig(_Strict):
    source: Literal["policy"] | FrozenModelConfig = "policy"
    """Which model samples the training rollouts: ``"policy"`` or a frozen model (``sft``'s teacher)."""


class EchoRoleConfig(_Strict):
    alpha: float = Field(0.1, gt=0)
    """The ``ce`` weight of this role's environment-provided tokens (ECHO's lambda)."""


OPSD_TEMPLATE = "Here is an example of an expert response:\n<demonstration>\n{demonstration}\n</demonstration>"
"""prime-rl's default system message carrying ``opsd``'s demonstration."""


OWNERS: dict[str, tuple[str, ...]] = {
    "length_penalty": ("grpo", "echo"), "decay": ("rae",), "episode_agents": ("hierarchical_grpo",),
    "teacher": ("opd",), "demo_key": ("opsd",), "template": ("opsd",), "renderer": ("opsd",),
    "roles": ("echo",), "filter": ("echo",),
}
"""Which algorithms each key belongs to (``type`` and ``sampling`` belong to all)."""


class AlgoConfig(_Strict):
    """The training algorithm and its settings; the defaults are today's GRPO."""

    type: AlgoType = "grpo"
    """``grpo`` (default), ``max_rl``, ``rae``, ``echo``, ``opd``, ``sft``, ``opsd`` or ``hierarchical_grpo``
    (docs/rl-algorithms.md: what each computes and which `prime rl run` trains today)."""
    sampling: AlgoSamplingConfig = Field(default_factory=AlgoSamplingConfig)
    """Which model samples the training rollouts (a frozen one only for ``sft``)."""
    length_penalty: LengthPenaltyConfig | None = None
    """``grpo``, ``echo``: shape rewards by length before the baseline (unset: off)."""
    decay: float = Field(0.95, ge=0, lt=1)
    """``rae``: EMA decay of each agent's baseline (SPIRAL's alpha)."""
    episode_agents: list[str] | None = None
    """``hierarchical_grpo``: roles compared within one proposed problem."""
    teacher: FrozenModelConfig | None = None
    """``opd``: the frozen teacher whose reverse KL the policy distills toward."""
    demo_key: str = "demonstration"
    """``opsd``: the example field holding the expert demonstration."""
    template: str = OPSD_TEMPLATE
    """``opsd``: the system message carrying the demonstration (``{demonstration}`` placeholder, ``str.format``)."""
    renderer: Any = None
    """``opsd``: the renderer of the hint block (prime-rl's; accepted as written)."""
    roles: dict[EchoRole, EchoRoleConfig] | None = None
    """``echo``: which environment-provided roles train with ``ce``, each at its own alpha (default: tool at 0.1)."""
    filter: dict[str, Any] | None = None
    """``echo``: prime-rl's user token filter (``import_path``, ``kwargs``)."""

    @model_serializer(mode="wrap")
    def _written(self, handler: Any) -> dict[str, Any]:
        """The type and the keys the user set: the other algorithms' defaults are not this one's settings."""
        data = handler(self)
        return {key: value for key, value in data.items() if key == "type" or key in self.model_fields_set}

    @model_validator(mode="after")
    def _keys_belong(self) -> AlgoConfig:
        for key in sorted(self.model_fields_set):
            owners = OWNERS.get(key)
            if owners and self.type not in owners:
                names = " or ".join(map(repr, owners))
                raise ValueError(f"algo.{key} belongs to algo.type {names}, not {self.type!r}; "
                                 "remove it or change algo.type")
        frozen = self.sampling.source != "policy"
        if frozen and self.type != "sft":
            raise ValueError(f"algo.type {self.type!r} needs rollouts sampled by the policy (importance ratios), but "
                             "algo.sampling.source is a frozen model; use algo.type = 'sft' to learn from a frozen "
                             "model's samples")
        if self.type == "sft" and not frozen:
            raise ValueError("algo.type 'sft' needs a teacher to sample from: set [algo.sampling.source] name and "
                             "base_url (cross-entropy on the policy's own tokens teaches nothing)")
        if self.type == "opd" and self.teacher is None:
            raise ValueError("algo.type 'opd' needs a teacher: set [algo.teacher] name and base_url")
        if self.type == "opsd":
            try:
                self.template.format(demonstration="")
            except (KeyError, IndexError, ValueError) as exc:
                raise ValueError(f"algo.template must hold {{demonstration}} and no other placeholder (double other "
                                 f"braces: {{{{ }}}}); str.format says {type(exc).__name__}: {exc}") from None
        if self.type == "hierarchical_grpo" and not self.episode_agents:
            raise ValueError("algo.type 'hierarchical_grpo' needs algo.episode_agents, e.g. [\"solver\"]")
        return self

    def build(self, trainer: Any = None) -> Any:
        """This algorithm's object (:mod:`rl_backend.algorithms`); ``trainer`` gives GRPO its advantage rule."""
        from rl_backend.advantages import make_advantage_rule
        from rl_backend.algorithms import ALGORITHMS, RAE, Echo, LengthPenalty

        cls = ALGORITHMS[self.type]
        if cls is RAE:
            return RAE(decay=self.decay)
        if self.type in ("grpo", "echo", "hierarchical_grpo"):
            rule = make_advantage_rule(trainer.advantage.type, trainer.advantage.std_normalize) if trainer else None
            penalty = LengthPenalty(**self.length_penalty.model_dump(exclude={"type"})) if self.length_penalty else None
            if cls is Echo:
                roles = {role: cfg.alpha for role, cfg in self.roles.items()} if self.roles else None
                return Echo(rule, penalty, roles=roles)
            return cls(rule, penalty)
        return cls()

    def action_component_name(self) -> str:
        """The loss component this algorithm's sampled tokens feed (``rl``, ``ce`` or ``ref_kl``)."""
        from rl_backend.algorithms import ALGORITHMS

        return ALGORITHMS[self.type].action_component

    def summary(self) -> str:
        """The plan's words for it: the name, the component its tokens feed, the settings that differ."""
        from rl_backend.algorithms import ALGORITHMS

        cls = ALGORITHMS[self.type]
        parts = [f"{self.type} ({cls.action_component} on sampled tokens"
                 + (f" + {cls.observation_component} on environment tokens" if cls.observation_component else "") + ")"]
        if self.type == "rae":
            parts.append(f"decay {self.decay:g}")
        if self.length_penalty is not None:
            lp = self.length_penalty
            parts.append(f"length penalty out {lp.num_output_tokens_weight:g} / in {lp.num_input_tokens_weight:g} "
                         f"/ turns {lp.num_turns_weight:g}")
        if self.teacher is not None:
            where = f"at {self.teacher.base_url}" if self.teacher.base_url else "(local, scored in-process)"
            parts.append(f"teacher {self.teacher.name} {where}")
        if isinstance(self.sampling.source, FrozenModelConfig):
            source = self.sampling.source
            where = f"at {source.base_url}" if source.base_url else "(local, served in-process)"
            parts.append(f"samples from {source.name} {where}")
        if self.type == "opsd":
            parts.append(f"teacher: the policy reading the demonstration '{self.demo_key}' first")
        if self.roles:
            parts.append("roles " + ", ".join(f"{r} {c.alpha:g}" for r, c in self.roles.items()))
        return ", ".join(parts)


def unavailable(algo: AlgoConfig, where: str = "algo") -> str | None:
    """The one-line refusal for an algorithm `prime rl run` cannot train yet, or ``None``."""
    from rl_backend.algorithms import ALGORITHMS

    cls = ALGORITHMS[algo.type]
    if cls.available():
        return None
    here = ", ".join(name for name, other in ALGORITHMS.items() if other.available())
    return (f"{where}.type = '{algo.type}' is not available in primekit yet: it needs {cls.missing}; "
            f"train with {here} here, or hand the run to prime-rl (`prime rl run --backend prime-rl`)")

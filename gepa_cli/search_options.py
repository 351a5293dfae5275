"""GEPA's search and stopping knobs: one declaration each, composed into the ``[gepa]`` table and the job config.

:class:`GepaSearchFields` is a field group: :class:`gepa_cli.config.GepaSection` (the TOML's ``[gepa]``
table) and :class:`gepa_cli.config.GepaJobConfig` both inherit it, and ``prime gepa run`` derives one
flag per field from it (:func:`primekit_cli.options.group_flags`), so a knob's name, default, bounds and docstring
live here only. Defaults are gepa 0.1.4's own (``gepa.optimize``), so leaving a knob out runs the
library as its authors tuned it. Importable without the gepa library: the objects gepa takes are
built by :mod:`gepa_cli.search` at run time.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

CANDIDATE_SELECTION = ("pareto", "current_best", "epsilon_greedy", "top_k_pareto")
FRONTIER_TYPES = ("instance", "objective", "hybrid", "cartesian")
ACCEPTANCE = ("strict_improvement", "improvement_or_equal")
VAL_POLICIES = ("full_eval", "subsample")
PROPOSAL_SELECTION = ("all", "best")
MODULE_SELECTORS = ("round_robin", "all")
COMPONENTS = ("system_prompt", "tools")
TEMPLATE_PLACEHOLDERS = ("<curr_param>", "<side_info>")
"""What gepa's instruction-proposal template must contain: the current text and the rollouts' feedback."""


class GepaSearchFields(BaseModel):
    """How GEPA searches and when it stops; every field is a ``[gepa]`` key and a ``prime gepa run`` flag."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    complete: ClassVar[bool] = True
    """False where the fields are one layer of several (the TOML, under CLI flags): cross-field checks wait."""

    # --- search --------------------------------------------------------------------------------
    candidate_selection_strategy: Literal["pareto", "current_best", "epsilon_greedy", "top_k_pareto"] = "pareto"
    """Which candidate is mutated next: pareto (sampled from the per-example frontier), current_best,
    epsilon_greedy (best, or a random one 10% of the time) or top_k_pareto (frontier restricted to the 5 best)."""
    frontier_type: Literal["instance", "objective", "hybrid", "cartesian"] = "instance"
    """What the Pareto frontier is kept over: instance (each validation example), objective (each reward
    function of the rubric), hybrid (both) or cartesian (example x reward function)."""
    acceptance_criterion: Literal["strict_improvement", "improvement_or_equal"] = "strict_improvement"
    """When a child that was scored on the parent's minibatch goes on to the validation pass: its minibatch
    sum beats the parent's (strict_improvement) or at least equals it (improvement_or_equal)."""
    use_merge: bool = False
    """Also propose merges: a candidate combining the components of two frontier candidates that share an ancestor."""
    max_merge_invocations: int = Field(default=5, ge=0)
    """Most merges accepted in one run (with use_merge)."""
    merge_val_overlap_floor: int = Field(default=5, ge=1)
    """Validation examples two parents must both have been scored on before a merge is tried (subsample policy)."""
    val_evaluation_policy: Literal["full_eval", "subsample"] = "full_eval"
    """Which validation examples an accepted candidate is scored on: every one (full_eval), or
    val_subsample_size of them drawn per candidate from the seed (subsample; the seed is scored on all)."""
    val_subsample_size: int | None = Field(default=None, ge=1)
    """Validation examples per accepted candidate under the subsample policy (required with it)."""
    cache_evaluation: bool = False
    """Reuse a (candidate, example) score already measured instead of running the rollout again (saves budget)."""
    reflection_prompt_template: str | None = None
    """The teacher's prompt, with <curr_param> (the current text) and <side_info> (the rollouts and their
    rewards) where gepa puts them; default: gepa's instruction-proposal prompt."""
    proposals_per_iteration: int = Field(default=1, ge=1)
    """Children proposed from one parent per iteration, each on its own minibatch; their rollouts run concurrently."""
    proposal_selection: Literal["all", "best"] = "all"
    """Of one iteration's children that pass acceptance, validate all, or only the best improvement."""
    components: list[str] = Field(default_factory=lambda: ["system_prompt"])
    """What a candidate is made of: system_prompt, tools (the descriptions of a tool environment's tools: native,
    legacy verifiers or a v1 taskset's MCP tools; written to tools.json), and in a multi-environment run
    system_prompt:<env> (that environment's own prompt); see --list-components."""
    module_selector: Literal["round_robin", "all"] = "round_robin"
    """With several components: rewrite one per proposal in turn (round_robin), or all of them at once."""

    # --- stoppers ------------------------------------------------------------------------------
    no_improvement_stop: int | None = Field(default=None, ge=1)
    """Stop after this many proposals in a row that did not raise the best validation score."""
    max_time: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop once the run has lasted this many seconds (a resumed run counts its earlier time), checked between
    proposals."""
    max_reflection_cost: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Stop once the teacher's calls cost this many USD (token counts times reflection_prices)."""
    reflection_prices: dict[str, tuple[float, float]] = Field(default_factory=dict)
    """USD per million (input, output) tokens by teacher model name, added to the built-in table
    (:data:`gepa_cli.stoppers.PRICES`); a run with max_reflection_cost needs the teacher priced."""

    @field_validator("reflection_prompt_template")
    @classmethod
    def _template_has_placeholders(cls, value: str | None) -> str | None:
        if value is None:
            return None
        missing = [p for p in TEMPLATE_PLACEHOLDERS if p not in value]
        if missing:
            raise ValueError(f"the template lacks {' and '.join(missing)} (gepa puts the current text at <curr_param> "
                             "and the rollouts' feedback at <side_info>)")
        return value

    @field_validator("components")
    @classmethod
    def _known_components(cls, value: list[str]) -> list[str]:
        unknown = [
            name for name in value if name not in COMPONENTS and not (name.startswith("system_prompt:") and name[14:])
        ]
        if unknown:
            raise ValueError(f"unknown component {', '.join(map(repr, unknown))} (known: {', '.join(COMPONENTS)})")
        if "system_prompt" not in value:
            raise ValueError("components must include system_prompt (the run's output schema is built around it)")
        return list(dict.fromkeys(value))

    @field_validator("reflection_prices")
    @classmethod
    def _finite_prices(cls, value: dict[str, tuple[float, float]]) -> dict[str, tuple[float, float]]:
        for name, pair in value.items():
            if any(not (0 <= price < float("inf")) for price in pair):
                raise ValueError(f"prices of '{name}' must be finite and >= 0 (USD per million input, output tokens)")
        return value

    @model_validator(mode="after")
    def _subsample_needs_size(self) -> GepaSearchFields:
        if self.complete and self.val_evaluation_policy == "subsample" and self.val_subsample_size is None:
            raise ValueError("val_evaluation_policy 'subsample' needs val_subsample_size (examples per candidate)")
        return self


SEARCH_RESUME_FIXED = ("frontier_type", "val_evaluation_policy", "val_subsample_size", "components")
"""Search keys a resumed run must keep: the saved frontier and scores were built under them."""


def search_field_names() -> list[str]:
    """The keys :class:`GepaSearchFields` declares (the flags derived from it, the TOML keys it adds)."""
    return list(GepaSearchFields.model_fields)

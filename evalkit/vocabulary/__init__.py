"""The config vocabulary shared by eval, GEPA and RL: each knob declared once, with its docstring, default and
validator, in field groups that the job configs compose (TOML keys stay flat), and the all-optional file schemas
derived from them (:func:`~evalkit.vocabulary.optional.all_optional`).

Adding a shared knob is one field in one group here plus, for the command line, one ``flag(...)`` line in the
table of each command that offers it (:mod:`primekit_cli.options`, which takes the help text and default from this
field)."""

from evalkit.vocabulary.groups import ConcurrencyFields, EnvFields, ModelFields, RolloutBounds, SecretsFields
from evalkit.vocabulary.optional import all_optional, shared_fields

__all__ = ["ModelFields", "RolloutBounds", "ConcurrencyFields", "EnvFields", "SecretsFields", "all_optional",
           "shared_fields"]

"""verifiers 0.4's run-config dialect on `prime eval run` and `prime gepa run` (``@ config.toml``, a v1-shaped TOML,
a taskset id with dotted overrides): :mod:`.args` reads the command line into raw config data, :mod:`.config`
validates it with verifiers' own config classes and translates it into primekit's fields, :mod:`.plans` hands the
commands their configs, and :mod:`.outputs` writes verifiers' run-dir layout beside the results.

It lives in the CLI because only the CLI uses it, and because reading a taskset id the way primekit finds
environments needs :mod:`evalkit.loading`, a layer above :mod:`evalkit.verifiers_compat`.
"""

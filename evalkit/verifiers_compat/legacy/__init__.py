"""verifiers' legacy API (``import verifiers as vf``, verifiers 0.3.1 only): an environment object run by verifiers
itself (:mod:`.env`), its model calls sent through :mod:`.bridge`; ``EnvGroup`` routing (:mod:`.env_group`) and
raising reward functions made visible (:mod:`.reward_errors`)."""

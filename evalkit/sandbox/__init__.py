"""A local sandbox for the programs a rollout runs: bubblewrap (``bwrap``) namespaces, no daemon, no privileges.

:mod:`.bwrap` builds the command line (what the sandbox sees, its limits) and says in one line when bwrap is
missing or cannot create namespaces; :mod:`.supervisor` is the first program inside (limits, the bridge to the
host's loopback ports, the verdict on a limit reached); :mod:`.bridge` is the host side of that bridge. None of
them imports verifiers: the runtime verifiers drives is :mod:`evalkit.verifiers_compat.v1.sandbox`.
"""

"""verifiers' v1 API (``import verifiers.v1 as vf``, both generations): a ``Taskset`` run by verifiers itself
(:mod:`.env`), its model calls served by an OpenAI-shaped bridge (:mod:`.bridge`), its harness programs run
offline (:mod:`.harness`, :mod:`.harness_workers`) and its trace files written beside the results (:mod:`.traces`)."""

"""primenb's own verifiers tasksets, each a top-level package in this folder (as an installed
taskset package is): `primenb.envs.verifiers_adapter.builtin_tasksets_on_path` puts the folder on
``sys.path`` (and ``PYTHONPATH``, for the processes verifiers starts), so verifiers' loader
resolves their ids as it resolves any taskset's. Nothing here is imported as ``primenb.*``."""

"""Every revision that changes results for the same inputs, in one place.

The result cache (:func:`reward_service.cache.request_key`) and the Celery dispatcher's job ids
(:func:`reward_service.dispatch.contract.job_id_for`, which also name stored results) are keyed
by :func:`results_revision`, so after a bump no result stored before it is served. Bump the
revision of the layer whose change alters results; CHANGELOG.md says what each value changed.
This module imports nothing of the service but the release, so every layer may use it.
"""

from __future__ import annotations

from reward_service import __version__

#: The engine's measurement and classification (instances, statuses, build flow).
ENGINE_REVISION = "13"
#: The fast path's point model, sampling and Icarus emulation (also keys its per-design
#: ``auto`` decisions).
FASTCOV_VERSION = "15"
#: The unreachability prover's verdicts (also keys its verdict cache).
PROVER_REVISION = "17"


def results_revision() -> dict[str, str]:
    """The release and every revision above, as one JSON-able mapping for cache keys."""
    return {
        "release": __version__,
        "engine": ENGINE_REVISION,
        "fastcov": FASTCOV_VERSION,
        "formal-prover": PROVER_REVISION,
    }

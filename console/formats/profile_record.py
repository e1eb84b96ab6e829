"""The gateway job record around a profile: what AKA's sandbox writes as
``<sync>/gateway_profile.json`` (FORMATS §8), ``{job_id, kind, status, result, error}`` with
the profile as ``result``. The ``[sandbox] PROFILE_JSON=`` line carries the bare profile.

Standard library only: the sandbox and the profile funnel use it where orjson is absent.
"""

from __future__ import annotations

from typing import Any


def profile_job_record(job_id: str | None, status: str, profile: dict[str, Any] | None, error: Any = None) -> dict[str, Any]:
    return {"job_id": job_id, "kind": "profile", "status": status, "result": profile, "error": error}


def is_job_record(obj: Any) -> bool:
    """A job record rather than a bare profile: it names a job and holds no kernels list."""
    return isinstance(obj, dict) and "job_id" in obj and "kernels" not in obj


def bare_profile(obj: Any) -> Any:
    """The profile in ``obj``: its ``result`` when ``obj`` is a job record, else ``obj``."""
    return obj.get("result") if is_job_record(obj) else obj

"""Sandbox jobs: run a command on a staged copy of a workspace (FORMATS §8).

``request`` parses and checks the flags, ``staging`` copies in and syncs back, ``slots``
keeps at most four jobs of a workspace running, ``record`` writes the live job record,
``local`` runs a command under ``supervisor`` (which holds and ends its whole process tree),
``private_shapes`` keeps the private table's path from every job, ``results`` turns output
into an exit status, and ``runner.run_job`` ties them together for the sandbox command line
and the console.
Standard library only: the sandbox runs on the GPU machine.
"""

from .request import JobRequest, RequestError, parse_request
from .runner import BackendUnavailable, JobOutcome, UnknownJob, cancel_job, run_job

__all__ = [
    "BackendUnavailable",
    "JobOutcome",
    "JobRequest",
    "RequestError",
    "UnknownJob",
    "cancel_job",
    "parse_request",
    "run_job",
]

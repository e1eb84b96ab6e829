"""One reader (and, where episcope writes the artifact, one writer) per artifact family.

Every function here is pure apart from the file it is asked to read: no widgets, no events,
no global state. See shared FORMATS.md for the layouts.

Records are frozen ``msgspec.Struct``s decoded with ``msgspec.convert`` (see
:mod:`records`): unknown keys are ignored, an absent field is ``None`` (never 0), a wrong
type is one :class:`~problems.FormatError` line naming the field path, and ``to_json()``
parses back to an equal record. Documents are read only from bounded regular files
(:mod:`bounded_read`).

The GPU machine has no msgspec: what its tools (``tools/abba.py``, the sandbox) must check
of evaluator results, ABBA runs and job records is in :mod:`gpu_side`, standard library only,
and a test pins that it accepts and refuses what the records here do. The timeline and
PROFILE_JSON readers are lenient by design: a value of the wrong type reads as ``None``
rather than refusing the document.
"""

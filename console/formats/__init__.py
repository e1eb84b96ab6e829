"""One reader (and, where episcope writes the artifact, one writer) per artifact family.

Every function here is pure apart from the file it is asked to read: no widgets, no events,
no global state. See shared FORMATS.md for the layouts.

Records are frozen ``msgspec.Struct``s decoded with ``msgspec.convert`` (see
:mod:`records`): unknown keys are ignored, an absent field is ``None`` (never 0), a wrong
type is one :class:`~problems.FormatError` line naming the field path, and ``to_json()``
parses back to an equal record. Documents are read only from bounded regular files
(:mod:`bounded_read`).

Three families keep standard-library ``NamedTuple`` records checked by :mod:`fields`:
evaluator results (``evaluations``), ABBA runs and verdicts (``abba``) and sandbox job
records (``job_record``). The GPU machine imports them (``tools/abba.py``, the sandbox)
and has no msgspec. The timeline and PROFILE_JSON readers are lenient by design: a value of
the wrong type reads as ``None`` rather than refusing the document.
"""

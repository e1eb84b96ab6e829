"""One reader (and, where episcope writes the artifact, one writer) per artifact family.

Every function here is pure apart from the file it is asked to read: no widgets, no events,
no global state. See shared FORMATS.md for the layouts.

Parsed records are immutable and cheap to define, because ``episcope status`` defines every
one of them as it starts (a frozen dataclass costs about 2 ms to create; these 0.05-0.3):

- ``msgspec.Struct`` with ``frozen=True``: the default;
- ``typing.NamedTuple`` in the modules the GPU machine imports, which must stay standard
  library only (problems, evaluations, abba, job_record). Such a module evaluates its
  annotations (no ``from __future__ import annotations``): NamedTuple compiles every string
  annotation, which doubles its cost. A NamedTuple record is also a tuple: it compares equal
  to a tuple of the same values, so compare records of one type only.

Either way unknown fields are ``None`` (never 0), the decoded object stays in ``raw`` and
``to_json()`` gives it back (``to_json = raw_json`` where the record is the document as
read). Copy with a change through ``msgspec.structs.replace(record, ...)`` or
``record._replace(...)``.
"""

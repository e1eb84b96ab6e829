"""One reader (and, where episcope writes the artifact, one writer) per artifact family.

Every function here is pure apart from the file it is asked to read: no widgets, no events,
no global state. See shared FORMATS.md for the layouts.
"""

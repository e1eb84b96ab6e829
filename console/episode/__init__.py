"""The event spine: events with provenance, tailer, ingest, reducer, guards, clock."""

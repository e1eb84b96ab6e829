"""Nsight Compute profile funnel: CSV parsing, diagnosis and profile-directory results.

Everything here except ``result`` runs on the GPU machine too, so it uses the standard
library only (no orjson, no console.formats.jsonio).
"""

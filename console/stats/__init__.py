"""Statistics for A/B latency comparisons: rank tests and distribution-free intervals.

Pure functions (no scipy), shared by the timeline overhead measurement
and any ABBA comparison. Exact small-sample distributions are computed with Python
integers, so p-values and interval coverages are exact where the text says so.
"""

"""Intra-kernel timelines (FORMATS §10, ATREXLT1 ABI 1.0): decode, export, receipts, overhead.

Everything in this package runs on the GPU machine too, so it imports only the standard
library and numpy (never ``console.formats.jsonio``, which needs orjson). The ``decode`` command
path (decode, summary, export, receipt) imports the standard library alone: numpy's import
costs as long as AKA's whole command (``decode.py`` says more).
"""

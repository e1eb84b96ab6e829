"""Reusable Textual widgets of the episcope console (one widget per module)."""

"""Kueue / JobSet scheduler and its pod placement record."""

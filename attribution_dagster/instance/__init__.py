"""Dagster instance tuning and storage for local instances (Dagster layer)."""

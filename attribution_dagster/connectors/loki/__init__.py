"""Grafana Loki log source."""

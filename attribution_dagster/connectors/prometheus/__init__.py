"""Prometheus metric source (PromQL over HTTP)."""

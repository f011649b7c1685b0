"""Kubernetes pod logs and Events as a log source."""

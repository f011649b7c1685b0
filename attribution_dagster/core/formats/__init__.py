"""Line and exposition readers shared by connectors and rules: timestamps, the block scanner,
Prometheus text, Kubernetes events."""

"""The Kubernetes API client shared by the Kueue scheduler and the pod-log source."""

"""Static scheduler: case directories and JSON-lines contexts."""

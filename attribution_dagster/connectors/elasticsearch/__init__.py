"""Elasticsearch log source (`kind: elasticsearch`): client.py (the block and the source),
query.py (the Query DSL it sends)."""

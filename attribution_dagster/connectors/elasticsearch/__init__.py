"""Elasticsearch log source (`kind: elasticsearch`): config.py, query.py, client.py."""

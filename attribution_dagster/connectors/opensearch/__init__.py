"""OpenSearch log source (`kind: opensearch`): client.py, the block and its transport over
`opensearch-py`; the mechanism and the Query DSL are connectors/elasticsearch/'s."""

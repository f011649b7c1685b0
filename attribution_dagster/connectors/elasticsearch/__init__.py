"""Query DSL log sources. source.py: the mechanism and the keys every such block shares
(shared with `kind: opensearch`, connectors/opensearch/); query.py: the Query DSL it sends;
client.py: `kind: elasticsearch`, the official `elasticsearch` client."""

"""The rule engine: `load_engine()` validates rules.yaml; `RuleEngine.attribute` decides.

One module per step (intake, candidates, peers, timing, progress, outcome) around the
working values in items.py; engine.py runs them in order. clocks.py and liveness.py hold the
clock-offset and last-line mechanics; rulebook.py the YAML schema.
"""

from attribution_dagster.rules.engine.engine import RuleEngine, load_engine

__all__ = ["RuleEngine", "load_engine"]

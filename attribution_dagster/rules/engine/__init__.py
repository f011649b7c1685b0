"""The rule engine: candidates, timing, peers, clocks, liveness, outcome."""

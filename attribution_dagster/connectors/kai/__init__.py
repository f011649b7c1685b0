"""KAI scheduler (accepted in configuration; discovery not implemented)."""

"""Models, configuration, host names and the formats every layer reads; imports nothing of the
project."""

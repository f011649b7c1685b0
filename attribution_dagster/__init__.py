"""attribution-dagster: why did this GPU job fail, and where to look first."""

__version__ = "0.1.0"

"""simfront: analytical roofline cost simulator for LLM inference serving."""

__version__ = "0.1.0"

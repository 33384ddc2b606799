"""envkit: a working GPU training environment in one command, and proof that it works."""

__version__ = "0.1.0"

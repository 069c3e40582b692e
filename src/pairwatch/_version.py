"""The package version, in a module of its own so that any part can read it without
importing the package face (which imports the integrations)."""

__version__ = "0.2.0"

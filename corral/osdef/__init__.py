"""OS definitions: discovery and validation, environments, script runs."""

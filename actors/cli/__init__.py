"""The `shoal` command."""

"""Helpers shared by several test folders (import with tests/ on sys.path)."""

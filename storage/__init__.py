"""Persistence: the schema, the change-point price store and every query."""

"""Fixture routes, one module per provider: each defines ROUTES."""

"""Readers and external sources."""

"""Distributed helpers."""

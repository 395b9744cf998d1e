"""Kept for existing imports: the strategies live in :mod:`codec.testing.strategies`."""
from .testing.strategies import *  # noqa: F401,F403

"""Steering memories (pins, importance, privacy, expiry, soft deletes and restores) and moving
them in and out (export and import)."""

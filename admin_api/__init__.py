"""The admin HTTP API (Litestar): apps, conversations, memories, jobs, energy, metrics."""

from admin_api.app import create_app

__all__ = ["create_app"]

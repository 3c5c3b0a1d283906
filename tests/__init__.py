"""The test suite: every module drives the service's real parts (see tests/conftest.py)."""

"""A switch that forbids requests to real models, so a unit test cannot reach one by accident.

The test suite turns it off for every test and on again only where a test means to talk to a
model (respx-mocked wire, the embedded model, a live Ollama).
"""

from __future__ import annotations

ALLOW_MODEL_REQUESTS = True


class ModelRequestsForbidden(RuntimeError):
    pass


def check_model_requests_allowed(model: str) -> None:
    if not ALLOW_MODEL_REQUESTS:
        raise ModelRequestsForbidden(
            f"a request to {model} was made while model requests are forbidden"
        )

"""An address that sends too many wrong tokens is refused for a while: on the API, the
console's sign-in and the MCP door alike (admin_api/throttle.py)."""

from __future__ import annotations

import re

import pytest
from httpx import ASGITransport, AsyncClient

from admin_api import create_app
from admin_api.throttle import MAX_WRONG, WINDOW_SECONDS, WrongTokens
from tests.harness import assistant_model, service

pytestmark = pytest.mark.anyio

TOKEN = "wrong-tokens-admin"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer guess"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_address_is_refused_after_too_many_wrong_tokens_until_the_oldest_is_a_window_old():
    clock = Clock()
    throttle = WrongTokens(max_wrong=3, window_seconds=60, clock=clock)
    for _ in range(2):
        throttle.record("10.0.0.1")
        clock.now += 10
    assert throttle.refused_for("10.0.0.1") is None
    throttle.record("10.0.0.1")  # the third, 20 s after the first
    assert throttle.refused_for("10.0.0.1") == 40
    assert throttle.refused_for("10.0.0.2") is None
    clock.now += 39.5
    assert throttle.refused_for("10.0.0.1") == 1
    clock.now += 0.5  # the first is a window old: two left in it
    assert throttle.refused_for("10.0.0.1") is None
    clock.now += 60
    throttle.record("10.0.0.1")
    assert throttle.refused_for("10.0.0.1") is None


def test_quiet_addresses_are_forgotten_when_many_are_kept(monkeypatch):
    monkeypatch.setattr("admin_api.throttle._MAX_ADDRESSES", 3)
    clock = Clock()
    throttle = WrongTokens(max_wrong=1, window_seconds=60, clock=clock)
    for address in ("a", "b", "c"):
        throttle.record(address)
    clock.now += 61
    throttle.record("d")  # a, b and c have nothing in the window any more
    assert throttle.refused_for("d") == 60
    for address in ("e", "f"):
        throttle.record(address)
    throttle.record("g")  # all four busy: the oldest, d, goes
    assert throttle.refused_for("d") is None
    assert all(throttle.refused_for(address) for address in ("e", "f", "g"))


async def _clients(services, clock: Clock) -> tuple[AsyncClient, AsyncClient]:
    """Two clients of one app, from two addresses; the app's throttle runs on `clock`."""
    app = create_app(services, TOKEN)
    app.state.wrong_tokens = WrongTokens(clock=clock)
    here = AsyncClient(transport=ASGITransport(app=app, client=("10.0.0.1", 5000)),
                       base_url="http://mnemoloop.test")
    there = AsyncClient(transport=ASGITransport(app=app, client=("10.0.0.2", 5000)),
                        base_url="http://mnemoloop.test")
    return here, there


async def test_the_api_refuses_an_address_that_guesses_even_the_right_token(db_path):
    clock = Clock()
    async with service(db_path, assistant_model()) as services:
        here, there = await _clients(services, clock)
        for _ in range(MAX_WRONG):
            assert (await here.get("/apps", headers=WRONG)).status_code == 401
        assert (await here.get("/apps")).status_code == 401  # no token at all: not a guess

        refused = await here.get("/apps", headers=ADMIN)
        assert refused.status_code == 429
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.headers["retry-after"] == str(int(WINDOW_SECONDS))
        assert "too many wrong tokens" in refused.json()["detail"]
        assert (await there.get("/apps", headers=ADMIN)).status_code == 200

        clock.now += WINDOW_SECONDS
        assert (await here.get("/apps", headers=ADMIN)).status_code == 200


async def test_a_valid_app_key_on_an_admin_route_is_not_a_guess(db_path):
    async with service(db_path, assistant_model()) as services:
        here, _ = await _clients(services, Clock())
        installed = await here.post("/apps", json={"appId": "cal", "name": "Calendar"},
                                    headers=ADMIN)
        own = {"Authorization": f"Bearer {installed.json()['apiKey']}"}
        for _ in range(MAX_WRONG + 1):
            assert (await here.get("/apps", headers=own)).status_code == 403
        assert (await here.get("/apps", headers=ADMIN)).status_code == 200


def _csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]*)"', html)
    assert found
    return found.group(1)


async def test_the_console_sign_in_refuses_an_address_that_guesses(db_path):
    clock = Clock()
    async with service(db_path, assistant_model()) as services:
        here, there = await _clients(services, clock)
        csrf = _csrf((await here.get("/console/sign-in")).text)
        for _ in range(MAX_WRONG):
            wrong = await here.post("/console/sign-in", data={"csrf": csrf, "token": "guess"})
            assert wrong.status_code == 401
        refused = await here.post("/console/sign-in", data={"csrf": csrf, "token": TOKEN})
        assert refused.status_code == 429 and "too many wrong tokens" in refused.text
        assert refused.headers["retry-after"] == str(int(WINDOW_SECONDS))
        assert "mnemoloop_console" not in refused.headers.get("set-cookie", "")
        # The API shares the count: the same address is refused there too.
        assert (await here.get("/apps", headers=ADMIN)).status_code == 429

        there_csrf = _csrf((await there.get("/console/sign-in")).text)
        signed = await there.post("/console/sign-in", data={"csrf": there_csrf, "token": TOKEN})
        assert signed.status_code == 303


async def test_the_mcp_door_refuses_an_address_that_guesses(db_path):
    clock = Clock()
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp_headers = {"Accept": "application/json, text/event-stream"}
    async with service(db_path, assistant_model()) as services:
        here, _ = await _clients(services, clock)
        for _ in range(MAX_WRONG):
            wrong = await here.post("/mcp/", json=request, headers={**mcp_headers, **WRONG})
            assert wrong.status_code == 401
        refused = await here.post("/mcp/", json=request, headers={**mcp_headers, **ADMIN})
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == str(int(WINDOW_SECONDS))
        assert refused.json()["status"] == 429

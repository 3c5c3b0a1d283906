"""An address that sends too many wrong tokens is refused for a while: on the API, the
console's sign-in and the MCP door alike (admin_api/throttle.py)."""

from __future__ import annotations

import anyio
import httpx
import pytest
from httpx import ASGITransport, AsyncClient

from admin_api import create_app
from admin_api.throttle import MAX_WRONG, WINDOW_SECONDS, Refused, WrongTokens, address_key
from tests.harness import assistant_model, csrf_in, live_http, service

pytestmark = pytest.mark.anyio

TOKEN = "wrong-tokens-admin"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WRONG = {"Authorization": "Bearer guess"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def guess(throttle: WrongTokens, address: str, right: bool = False) -> None:
    async with throttle.checking(address) as check:
        if not right:
            check.wrong()


async def test_an_address_is_refused_after_too_many_wrong_tokens_until_the_oldest_is_a_window_old():
    clock = Clock()
    throttle = WrongTokens(max_wrong=3, window_seconds=60, clock=clock)
    for _ in range(2):
        await guess(throttle, "10.0.0.1")
        clock.now += 10
    await guess(throttle, "10.0.0.1", right=True)  # a right token neither counts nor clears
    assert throttle.refused_for("10.0.0.1") is None
    await guess(throttle, "10.0.0.1")  # the third, 20 s after the first
    assert throttle.refused_for("10.0.0.1") == 40
    with pytest.raises(Refused) as refused:
        await guess(throttle, "10.0.0.1", right=True)
    assert refused.value.seconds == 40
    await guess(throttle, "10.0.0.2", right=True)
    clock.now += 39.5
    assert throttle.refused_for("10.0.0.1") == 1
    clock.now += 0.5  # the first is a window old: two left in it
    await guess(throttle, "10.0.0.1", right=True)
    await guess(throttle, "10.0.0.1")
    assert throttle.refused_for("10.0.0.1") == 10


async def test_checks_in_flight_count_so_a_burst_gets_no_more_guesses():
    throttle = WrongTokens(max_wrong=3, window_seconds=60, clock=Clock())
    release, running, most, outcomes = anyio.Event(), [0], [0], []

    async def slow_guess() -> None:
        try:
            async with throttle.checking("10.0.0.1") as check:
                running[0] += 1
                most[0] = max(most[0], running[0])
                await release.wait()  # as checking an app's key reads the database
                running[0] -= 1
                check.wrong()
            outcomes.append("checked")
        except Refused:
            outcomes.append("refused")

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(slow_guess)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert most[0] == 3
    assert sorted(outcomes) == ["checked"] * 3 + ["refused"] * 7


async def test_many_right_tokens_at_once_wait_their_turn_and_pass():
    throttle = WrongTokens(max_wrong=3, window_seconds=60, clock=Clock())
    passed = []

    async def right_token() -> None:
        async with throttle.checking("10.0.0.1"):
            await anyio.sleep(0.01)
        passed.append(1)

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(right_token)
    assert len(passed) == 10
    assert throttle.refused_for("10.0.0.1") is None


def test_an_ipv6_host_counts_by_its_64_and_every_loopback_address_as_one():
    assert address_key("2001:db8:1:2:aaaa::1") == address_key("2001:db8:1:2:bbbb::9")
    assert address_key("2001:db8:1:2::1") != address_key("2001:db8:1:3::1")
    assert address_key("::ffff:192.0.2.7") == address_key("192.0.2.7") == "192.0.2.7"
    loopbacks = {"127.0.0.1", "127.13.37.1", "::1", "::ffff:127.0.0.2"}
    assert {address_key(address) for address in loopbacks} == {"loopback"}
    assert address_key("") == ""


async def test_waiting_checks_take_their_turns_in_order_and_hear_a_refusal():
    throttle = WrongTokens(max_wrong=2, window_seconds=60, clock=Clock())
    gates = [anyio.Event() for _ in range(5)]
    order: list[int] = []
    outcomes: dict[int, str] = {}

    async def request(n: int, wrong: bool) -> None:
        try:
            async with throttle.checking("10.0.0.1") as check:
                order.append(n)
                await gates[n].wait()
                if wrong:
                    check.wrong()
            outcomes[n] = "checked"
        except Refused:
            outcomes[n] = "refused"

    async with anyio.create_task_group() as group:
        for n in range(5):
            group.start_soon(request, n, n in (1, 2))  # 1 and 2 are wrong
            await anyio.wait_all_tasks_blocked()
        assert order == [0, 1]  # two in flight, three waiting
        gates[0].set()  # right: its room goes to the first to have waited
        await anyio.wait_all_tasks_blocked()
        assert order == [0, 1, 2]
        gates[1].set()  # wrong: one wrong and one in flight leave no room
        await anyio.wait_all_tasks_blocked()
        assert order == [0, 1, 2]
        gates[2].set()  # two wrong: refused, and every waiter hears it
    assert order == [0, 1, 2]
    assert outcomes == {0: "checked", 1: "checked", 2: "checked", 3: "refused", 4: "refused"}


async def test_the_least_recently_seen_idle_address_is_forgotten_when_many_are_kept(
    monkeypatch,
):
    monkeypatch.setattr("admin_api.throttle._MAX_ADDRESSES", 3)
    throttle = WrongTokens(max_wrong=1, window_seconds=60, clock=Clock())
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        await guess(throttle, address)
    with pytest.raises(Refused):
        await guess(throttle, "10.0.0.1")  # seen again: now the most recent
    await guess(throttle, "10.0.0.4")
    assert throttle.refused_for("10.0.0.2") is None  # forgotten
    assert all(throttle.refused_for(f"10.0.0.{n}") for n in (1, 3, 4))


async def test_an_address_with_a_check_in_flight_is_not_forgotten(monkeypatch):
    monkeypatch.setattr("admin_api.throttle._MAX_ADDRESSES", 2)
    throttle = WrongTokens(max_wrong=1, window_seconds=60, clock=Clock())
    release = anyio.Event()

    async def slow_wrong_guess() -> None:
        async with throttle.checking("10.0.0.1") as check:
            await release.wait()
            check.wrong()

    async with anyio.create_task_group() as group:
        group.start_soon(slow_wrong_guess)
        await anyio.wait_all_tasks_blocked()
        await guess(throttle, "10.0.0.2")
        await guess(throttle, "10.0.0.3")  # the table is full: 10.0.0.2 goes, not .1
        release.set()
    assert throttle.refused_for("10.0.0.1")
    assert throttle.refused_for("10.0.0.2") is None


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
        for _ in range(MAX_WRONG - 1):
            assert (await here.get("/apps", headers=WRONG)).status_code == 401
        for _ in range(3):  # no token at all is not a guess
            assert (await here.get("/apps")).status_code == 401
        assert (await here.get("/apps", headers=ADMIN)).status_code == 200
        assert (await here.get("/apps", headers=WRONG)).status_code == 401

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


async def test_the_console_sign_in_refuses_an_address_that_guesses(db_path):
    clock = Clock()
    async with service(db_path, assistant_model()) as services:
        here, there = await _clients(services, clock)
        csrf = csrf_in((await here.get("/console/sign-in")).text)
        for _ in range(MAX_WRONG):
            wrong = await here.post("/console/sign-in", data={"csrf": csrf, "token": "guess"})
            assert wrong.status_code == 401
        refused = await here.post("/console/sign-in", data={"csrf": csrf, "token": TOKEN})
        assert refused.status_code == 429 and "too many wrong tokens" in refused.text
        assert refused.headers["retry-after"] == str(int(WINDOW_SECONDS))
        assert "mnemoloop_console" not in refused.headers.get("set-cookie", "")
        # The API shares the count: the same address is refused there too.
        assert (await here.get("/apps", headers=ADMIN)).status_code == 429

        there_csrf = csrf_in((await there.get("/console/sign-in")).text)
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
        clock.now += WINDOW_SECONDS  # the door counts on the app's own throttle
        wrong = await here.post("/mcp/", json=request, headers={**mcp_headers, **WRONG})
        assert wrong.status_code == 401


async def test_a_burst_of_guesses_at_once_is_counted_as_it_comes(db_path):
    async with service(db_path, assistant_model()) as services:
        here, _ = await _clients(services, Clock())
        statuses: list[int] = []

        async def one_guess() -> None:
            statuses.append((await here.get("/apps", headers=WRONG)).status_code)

        async with anyio.create_task_group() as group:
            for _ in range(100):
                group.start_soon(one_guess)
        assert sorted(statuses) == [401] * MAX_WRONG + [429] * (100 - MAX_WRONG)


async def test_x_forwarded_for_does_not_give_a_guesser_new_addresses(db_path):
    async with service(db_path, assistant_model()) as services, \
            live_http(services, TOKEN) as url, httpx.AsyncClient(base_url=url) as client:
        for n in range(MAX_WRONG):
            spoofed = {**WRONG, "X-Forwarded-For": f"198.51.100.{n}"}
            assert (await client.get("/apps", headers=spoofed)).status_code == 401
        spoofed = {**ADMIN, "X-Forwarded-For": "198.51.100.200"}
        assert (await client.get("/apps", headers=spoofed)).status_code == 429

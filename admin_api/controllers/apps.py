"""Installed apps: install, list, read, change (profiles shared, users' memories shared, time to
live) and uninstall."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from litestar import Controller, Request, delete, get, patch, post
from litestar.params import FromPath, JSONBody, QueryParameter

from admin_api.auth import admin_only
from admin_api.dependencies import Provided
from admin_api.replies import AppOut, AppsOut, InstalledAppOut, UninstalledOut, problems
from admin_api.schemas import AppSettings, InstallApp, strict_booleans
from loop.operations import App
from loop.service import Stores


class AppsController(Controller):
    path = "/apps"
    tags = ["apps"]
    before_request = staticmethod(admin_only)

    @post(
        "/",
        summary="Install an app (or re-install an uninstalled one); its API key is shown once",
        responses=problems(400, 401, 403, 409, 413),
    )
    async def install(
        self, request: Request[Any, Any, Any], data: JSONBody[InstallApp], stores: Provided[Stores]
    ) -> InstalledAppOut:
        strict_booleans(await request.json(), "usersWriteShared", "sharesProfile")
        if data.allowed_kinds is not None:  # refused before anything is installed
            stores.agent.kinds.known(data.allowed_kinds, "allowedKinds")
        installed = await stores.registry.install(data.app_id, data.name)
        if data.users_write_shared:
            await stores.registry.set_users_write_shared(data.app_id, True)
        if data.shares_profile:
            await stores.registry.set_shares_profile(data.app_id, True)
        if data.memory_ttl_seconds is not None:
            await stores.registry.set_memory_ttl(data.app_id, data.memory_ttl_seconds)
        if data.allowed_kinds is not None:
            await stores.registry.set_allowed_kinds(data.app_id, data.allowed_kinds)
        app = installed.app
        return InstalledAppOut(app.app_id, app.name, app.installed, installed.api_key)

    @get("/", summary="List apps with their memory counts", responses=problems(401, 403))
    async def list_apps(self, stores: Provided[Stores]) -> AppsOut:
        return AppsOut([_app_out(a) for a in await stores.registry.list()])

    @get(
        "/{app_id:str}",
        summary="An app: its settings and memory count",
        responses=problems(401, 403, 404),
    )
    async def get_app(self, app_id: FromPath[str], stores: Provided[Stores]) -> AppOut:
        app = await stores.registry.require(app_id)
        return _app_out(replace(app, memory_count=await stores.agent.get_memory_count(app_id)))

    @patch(
        "/{app_id:str}",
        summary="Change an app's settings",
        description=(
            "Only the fields present change. `usersWriteShared`: a conversation of one of"
            " the app's users writes its memory to the app's shared space too (every user's"
            " conversations get those). `memoryTtlSeconds`: the time to live a new memory of"
            " the app gets (a date the user gives, \"remember this until Friday\", comes"
            " first); `null` removes it. Memories already held keep their expiry."
            " `sharesProfile`: the app reads and writes its users' profiles, the facts about a"
            " person that hold whatever the app (name, timezone, diet, household), which every"
            " app sharing them is given; off, it neither reads nor writes them."
            " `allowedKinds`: the kinds of memory the app's key and its conversations may"
            " read (the kinds file's: `GET /kinds`); `null` allows every kind."
        ),
        responses=problems(400, 401, 403, 404, 413),
    )
    async def change(
        self,
        request: Request[Any, Any, Any],
        app_id: FromPath[str],
        data: JSONBody[AppSettings],
        stores: Provided[Stores],
    ) -> AppOut:
        raw = await request.json()
        strict_booleans(raw, "usersWriteShared", "sharesProfile")
        app = await stores.registry.require(app_id)
        if data.shares_profile is not None:
            app = await stores.registry.set_shares_profile(app_id, data.shares_profile)
        if data.users_write_shared is not None:
            app = await stores.registry.set_users_write_shared(app_id, data.users_write_shared)
        if isinstance(raw, dict) and "memoryTtlSeconds" in raw:
            app = await stores.registry.set_memory_ttl(app_id, data.memory_ttl_seconds)
        if isinstance(raw, dict) and "allowedKinds" in raw:
            app = await stores.registry.set_allowed_kinds(app_id, data.allowed_kinds)
        return _app_out(app)

    @delete(
        "/{app_id:str}",
        status_code=200,
        summary="Uninstall an app; its memories stay unless purgeMemories=true",
        responses=problems(400, 401, 403, 404),
    )
    async def uninstall(
        self,
        app_id: FromPath[str],
        stores: Provided[Stores],
        purge_memories: Annotated[bool, QueryParameter(name="purgeMemories")] = False,
    ) -> UninstalledOut:
        purged = await stores.registry.uninstall(app_id, purge_memories=purge_memories)
        return UninstalledOut(True, purged)


def _app_out(app: App) -> AppOut:
    return AppOut(
        app.app_id, app.name, app.installed, app.memory_count, app.users_write_shared,
        app.memory_ttl_seconds, app.shares_profile,
        None if app.allowed_kinds is None else list(app.allowed_kinds),
    )

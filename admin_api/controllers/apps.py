from __future__ import annotations

from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.params import FromPath, JSONBody, QueryParameter

from admin_api.auth import admin_only
from admin_api.dependencies import Provided
from admin_api.schemas import AppOut, AppsOut, InstallApp, InstalledAppOut, UninstalledOut, problems
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
        self, data: JSONBody[InstallApp], stores: Provided[Stores]
    ) -> InstalledAppOut:
        installed = await stores.registry.install(data.app_id, data.name)
        app = installed.app
        return InstalledAppOut(app.app_id, app.name, app.installed, installed.api_key)

    @get("/", summary="List apps with their memory counts", responses=problems(401, 403))
    async def list_apps(self, stores: Provided[Stores]) -> AppsOut:
        return AppsOut(
            [
                AppOut(a.app_id, a.name, a.installed, a.memory_count)
                for a in await stores.registry.list()
            ]
        )

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

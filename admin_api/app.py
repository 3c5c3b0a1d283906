"""`create_app(services, admin_token)`: the HTTP face of a running mnemoloop."""

from __future__ import annotations

from litestar import Litestar, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme

from admin_api.controllers.apps import AppsController
from admin_api.controllers.conversations import ConversationsController
from admin_api.controllers.history import HistoryController
from admin_api.controllers.memories import MemoriesController
from admin_api.controllers.operations import OperationsController, health
from admin_api.errors import EXCEPTION_HANDLERS
from loop.service import Services

MAX_BODY_BYTES = 64 * 1024


def create_app(services: Services, admin_token: str) -> Litestar:
    def provide_services() -> Services:
        return services

    guarded = Router(
        path="/",
        route_handlers=[
            AppsController,
            ConversationsController,
            HistoryController,
            MemoriesController,
            OperationsController,
        ],
        security=[{"bearer": []}],
    )
    app = Litestar(
        route_handlers=[health, guarded],
        dependencies={"services": Provide(provide_services, use_cache=True, sync_to_thread=False)},
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=MAX_BODY_BYTES,
        openapi_config=OpenAPIConfig(
            title="mnemoloop",
            version="0.1.0",
            description="Per-app memories that maintain themselves; admin and conversation API.",
            path="/schema",
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer"),
                }
            ),
        ),
        debug=False,
        # The service configures logging once, for every part of it.
        logging_config=None,
    )
    app.state.services = services
    app.state.admin_token = admin_token
    return app

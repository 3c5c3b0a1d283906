"""What an operator runs and watches: installed apps, the admin token, console sessions, the
energy budget, health checks and metrics."""
from loop.operations.admin_token import (
    REFRESH_SECONDS,
    AdminToken,
)
from loop.operations.console_sessions import (
    SESSION_SECONDS,
    ConsoleSession,
    ConsoleSessions,
)
from loop.operations.energy import (
    MinuteSpending,
)
from loop.operations.health import (
    HealthChecks,
    ModelSetup,
    PartHealth,
)
from loop.operations.metrics import (
    CONTENT_TYPE,
    Metrics,
)
from loop.operations.registry import (
    APP_ID_PATTERN,
    MAX_NAME,
    MAX_USER_ID,
    NAME_PATTERN,
    USER_ID_PATTERN,
    App,
    AppRegistry,
    validate_user_id,
)

__all__ = [
    "APP_ID_PATTERN",
    "CONTENT_TYPE",
    "MAX_NAME",
    "MAX_USER_ID",
    "NAME_PATTERN",
    "REFRESH_SECONDS",
    "SESSION_SECONDS",
    "USER_ID_PATTERN",
    "AdminToken",
    "App",
    "AppRegistry",
    "ConsoleSession",
    "ConsoleSessions",
    "HealthChecks",
    "Metrics",
    "MinuteSpending",
    "ModelSetup",
    "PartHealth",
    "validate_user_id",
]

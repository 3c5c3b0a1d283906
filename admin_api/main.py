"""The `mnemoloop` command: the loop's CLI, with this package's HTTP app as its face.

The command lives here, at the top of the layers, so that `loop` never imports `admin_api`.
"""

from __future__ import annotations

import sys

from admin_api.app import create_app
from loop import cli


def main() -> None:
    sys.exit(cli.main(http_app_factory=create_app))


if __name__ == "__main__":
    main()

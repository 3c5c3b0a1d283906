"""`python -m mnemoloop`, the same as the `mnemoloop` command."""

import sys

from mnemoloop.cli import main

sys.exit(main())

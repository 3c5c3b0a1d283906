"""What runs mnemoloop: the `mnemoloop` command, `serve` (loop, memory worker and HTTP API in
one process), `worker` (memory work only), the terminal chat and the demo.

This is the composition root, the only package that sees every layer
(`admin_api → loop → memory_agent`); no layer imports it.
"""

"""The host: settings, database, app registry, conversations, energy, the central loop, LLM
adapters, the service runner and the CLI."""

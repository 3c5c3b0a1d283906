"""Chat-model backends behind `memory_agent.chat_model.ChatModel`."""

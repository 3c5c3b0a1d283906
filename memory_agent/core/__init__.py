"""What the memory agent and its host share: the chat-model seam, the database and clock
ports, errors, energy metering, the redaction of secrets and the one Unicode form."""

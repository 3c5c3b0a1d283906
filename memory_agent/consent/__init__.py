"""Consent before a person's profile changes: which sensitive fields a text speaks of
(`fields`), and a change to them held as a proposal until the person answers (`holding`)."""

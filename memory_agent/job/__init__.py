"""One memory job: an ended conversation's memory written into its space in one transaction,
then its copies (the app's shared space, the person's profile)."""

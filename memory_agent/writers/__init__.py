"""The two writers behind one seam: what a conversation's memory says, what it updates, and how
a space over its cap comes back to it (`writer.py` holds the seam)."""

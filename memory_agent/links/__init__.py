"""How alike two memories' texts are, in any script (`likeness`), and the links a memory is
given to the memories of its space it shares most with (`linking`)."""

"""What a conversation is given of its memories: the memory block and its delta header."""

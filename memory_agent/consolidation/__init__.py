"""The consolidation pass: pairs of memories that say the same thing, or the same thing's two
values, found without a model (`pairs`), judged by the writer (`writers.pairs`), and applied one
pair at a time, each in a transaction of its own (`consolidator`)."""

"""What a model's latest work says of it: whether the checks kept it, one result at a time.

The memory writer keeps one for the model's memory sentences (a model whose sentences nearly
all pass is trusted with more; one whose record is `known` and falls short is doubted), the
compactor one for its decisions. A model whose latest work
was nearly all set aside adds nothing to what the checks and the policy do alone: it is asked
one time in `SAMPLE_EVERY`, which keeps its record current, and spared the others.

Until a record is known it may lean on what is known of the model elsewhere (its `prior`):
the compactor's leans on the writer's, so a model whose memories add nothing is not first
asked a handful of compaction decisions, each a long prompt, only to learn the same of them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

SAMPLE_EVERY = 10
# Below this share of its latest work kept, a model adds next to nothing.
HELPFUL_SHARE = 0.1


class TrackRecord:
    def __init__(
        self, *, size: int, minimum: int, prior: Callable[[], bool] | None = None
    ) -> None:
        self._results: deque[bool] = deque(maxlen=size)
        self._minimum = minimum  # results needed before the record says anything
        # Whether the model adds little, by what else is known of it, until this is known.
        self._prior = prior
        self._asks_while_adding_little = 0

    def add(self, kept: bool) -> None:
        self._results.append(kept)

    @property
    def known(self) -> bool:
        """Enough results for the record to say anything."""
        return len(self._results) >= self._minimum

    def kept_at_least(self, share: float) -> bool:
        """Enough results, and at least `share` of them kept."""
        return self.so_far_kept_at_least(share, results=self._minimum)

    def so_far_kept_at_least(self, share: float, *, results: int) -> bool:
        """At least `results` results, fewer than the record needs to be known, or any number
        once it is, and at least `share` of them kept: what the record points to so far."""
        found = self._results
        return len(found) >= min(results, self._minimum) and sum(found) >= share * len(found)

    @property
    def adds_little(self) -> bool:
        """Enough results, and nearly none of them kept. Before that, what the prior says,
        unless one of the model's own results was kept: it has shown it adds something."""
        results = self._results
        if len(results) < self._minimum:
            return not any(results) and self._prior is not None and self._prior()
        return sum(results) < HELPFUL_SHARE * len(results)

    def spares_the_model(self) -> bool:
        """Whether to do this piece of work without the model: it adds little, and this is
        not the one time in `SAMPLE_EVERY` it is asked all the same."""
        if not self.adds_little:
            return False
        self._asks_while_adding_little += 1
        return self._asks_while_adding_little % SAMPLE_EVERY != 0

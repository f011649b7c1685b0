"""Facts: what one matched line says, as a plain object, and their folding (issue 16).

The hot loop of the normalizer never builds a pydantic object: a matched line becomes a
`Fact` (a slotted dataclass), facts identical in kind, node, GPU, PCI, port, peer, code,
parser, time quality, source and attrs are folded into one, and the typed `Observation` is
validated once per distinct fact. A folded observation carries `count`, its first time and
locator (`time`, `locator`) and its last ones (`time_last`, `locator_last`).

So a node that logs 800,000 identical XID lines, or thousands of NCCL `comm 0x... rank N
nRanks M` init lines naming the same (rank, address), costs memory and engine time per
distinct fact, not per line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from attribution_dagster.core.formats.timestamps import earlier
from attribution_dagster.core.observation import Observation


@dataclass(slots=True)
class Fact:
    """One observation before validation (same attribute names as Observation)."""

    kind: str
    node: str
    time: datetime | None
    time_quality: str
    time_latest: datetime | None
    excerpt: str
    source: str
    locator: Any
    parser: str
    attrs: dict[str, Any]
    fields: dict[str, Any]
    count: int = 1
    time_last: datetime | None = None
    locator_last: Any = None

    def moved(self, node: str, attrs: dict[str, Any]) -> Fact:
        """The same fact, about another node (launcher prefixes, echoes)."""
        return Fact(
            self.kind,
            node,
            self.time,
            self.time_quality,
            self.time_latest,
            self.excerpt,
            self.source,
            self.locator,
            self.parser,
            attrs,
            self.fields,
            self.count,
            self.time_last,
            self.locator_last,
        )

    def key(self) -> tuple[Any, ...]:
        """What makes two facts the same fact (time, locator and excerpt excluded)."""
        try:
            attrs: Any = tuple(sorted(self.attrs.items()))
            fields: Any = tuple(sorted(self.fields.items()))
            hash((attrs, fields))
        except TypeError:  # an unhashable value: compare by text
            attrs, fields = repr(sorted(self.attrs.items())), repr(sorted(self.fields.items()))
        return (
            self.kind,
            self.node,
            self.parser,
            self.source,
            self.time_quality,
            fields,
            attrs,
        )

    def absorb(self, other: Fact) -> None:
        """Fold `other` (the same fact, another occurrence) into this one."""
        mine_last = self.time_last if self.time_last is not None else self.time
        mine_last_loc = self.locator_last if self.locator_last is not None else self.locator
        its_last = other.time_last if other.time_last is not None else other.time
        its_last_loc = other.locator_last if other.locator_last is not None else other.locator
        if other.time is not None and (self.time is None or earlier(other.time, self.time)):
            self.time, self.time_latest = other.time, other.time_latest
            self.locator, self.excerpt = other.locator, other.excerpt
        if its_last is not None and (mine_last is None or not earlier(its_last, mine_last)):
            mine_last, mine_last_loc = its_last, its_last_loc
        elif its_last is None and mine_last is None:
            mine_last_loc = its_last_loc
        self.count += other.count
        self.time_last, self.locator_last = mine_last, mine_last_loc

    def observation(self) -> Observation | None:
        """The typed Observation (validated here, once); None when a value does not fit."""
        try:
            return Observation(
                kind=self.kind,
                node=self.node,
                time=self.time,
                time_quality=self.time_quality,  # type: ignore[arg-type]
                time_latest=self.time_latest,
                excerpt=self.excerpt,
                source=self.source,
                locator=self.locator,
                parser=self.parser,
                attrs=self.attrs,
                count=self.count,
                time_last=self.time_last if self.count > 1 else None,
                locator_last=self.locator_last if self.count > 1 else None,
                **self.fields,
            )
        except Exception:  # a value that does not fit the model: drop this match only
            return None


def fold(facts: Iterable[Fact]) -> list[Observation]:
    """One Observation per distinct fact, in first-seen order; memory grows with the
    distinct facts (the facts are consumed as they come)."""
    groups: dict[tuple[Any, ...], Fact] = {}
    copied: set[tuple[Any, ...]] = set()  # groups that hold a copy (absorb changes it)
    for f in facts:
        k = f.key()
        have = groups.get(k)
        if have is None:
            groups[k] = f  # most facts are alone: copied only when a second one comes
        else:
            if k not in copied:
                copied.add(k)
                have = groups[k] = have.moved(have.node, have.attrs)
            have.absorb(f)
    out = []
    for k in list(groups):  # first-seen order; each fact freed once its Observation is built
        o = groups.pop(k).observation()
        if o is not None:
            out.append(o)
    return out

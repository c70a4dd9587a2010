"""Interned names: (service, operation) pairs become endpoint ids, (host, container)
pairs placement ids, shared by every worker through two Redis hashes.

A stored span carries two 4-byte ids instead of four strings. Ids are handed out by a
Lua script (atomic, so two workers never give one name two ids) and cached in each
process; they are never reused or deleted (a deployment has thousands of names, not
millions: operation names must be routes, not raw URLs with ids in them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import redis

from tracing.redisconn import Keys, as_text

ENDPOINT = "e"
PLACEMENT = "p"
_SEP = "\0"

_INTERN = """
local out = {}
for i, text in ipairs(ARGV) do
  local id = redis.call('HGET', KEYS[1], text)
  if not id then
    id = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[1], text, id)
    redis.call('HSET', KEYS[2], id, text)
  end
  out[i] = tonumber(id)
end
return out
"""


def endpoint_text(service: str, operation: str) -> str:
    return f"{ENDPOINT}{_SEP}{service}{_SEP}{operation}"


def placement_text(host: str, container: str) -> str:
    return f"{PLACEMENT}{_SEP}{host}{_SEP}{container}"


@dataclass(frozen=True)
class NameTable:
    """Every interned name, read once per analysis: ids -> (service, operation) and
    ids -> (host, container)."""

    endpoints: dict[int, tuple[str, str]]
    placements: dict[int, tuple[str, str]]

    def endpoint(self, ident: int) -> tuple[str, str]:
        return self.endpoints.get(ident, ("(unknown)", "(unknown)"))

    def placement(self, ident: int) -> tuple[str, str]:
        return self.placements.get(ident, ("", ""))


class NameBook:
    """Gives out ids for names (cached) and reads them all back."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._ids: dict[str, int] = {}
        self._script = client.register_script(_INTERN)

    def ids(self, texts: Sequence[str]) -> list[int]:
        """The id of each text, interning the new ones in one round trip."""
        new = [t for t in dict.fromkeys(texts) if t not in self._ids]
        if new:
            keys = [self.keys.names, self.keys.names_rev, self.keys.names_seq]
            got = self._script(keys=keys, args=[t.encode("utf-8") for t in new])
            self._ids.update(zip(new, (int(i) for i in got), strict=True))
        return [self._ids[t] for t in texts]

    def forget(self) -> None:
        """Drop the cached ids (after Redis lost its data)."""
        self._ids.clear()

    def table(self) -> NameTable:
        raw = self.client.hgetall(self.keys.names_rev)
        return name_table((int(as_text(k)), as_text(v)) for k, v in raw.items())


def name_table(entries: Iterable[tuple[int, str]]) -> NameTable:
    endpoints: dict[int, tuple[str, str]] = {}
    placements: dict[int, tuple[str, str]] = {}
    for ident, text in entries:
        kind, _, rest = text.partition(_SEP)
        first, _, second = rest.partition(_SEP)
        if kind == ENDPOINT:
            endpoints[ident] = (first, second)
        elif kind == PLACEMENT:
            placements[ident] = (first, second)
    return NameTable(endpoints, placements)

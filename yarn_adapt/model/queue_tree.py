"""What every queue tree shares, Capacity and Fair alike: dotted paths, walking,
finding, and replacing a queue in a frozen tree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Generic, Self, TypeVar


class QueueNode:
    """Mixin for frozen queue dataclasses that declare ``path`` and ``children``."""

    path: str
    children: tuple[Self, ...]

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]

    @property
    def parent_path(self) -> str | None:
        return self.path.rsplit(".", 1)[0] if "." in self.path else None

    def walk(self) -> Iterator[Self]:
        """This queue and every descendant, parents before children."""
        yield self
        for child in self.children:
            yield from child.walk()

    def child(self, name: str) -> Self | None:
        return next((c for c in self.children if c.name == name), None)


Q = TypeVar("Q", bound=QueueNode)
_INDEX = "_queues_by_path"


class QueueTree(Generic[Q]):
    """Mixin for frozen configurations that declare a ``root`` queue."""

    root: Q

    def queues(self) -> Iterator[Q]:
        return self.root.walk()

    def leaves(self) -> Iterator[Q]:
        return (q for q in self.root.walk() if _is_leaf(q))

    def find(self, path: str) -> Q | None:
        return self._by_path().get(path)

    def _by_path(self) -> dict[str, Q]:
        """Every queue by path, built once per (frozen) tree: the tuner looks up
        each of 500 groups' queues many times, and a walk per look-up cost it 17 s."""
        index: dict[str, Q] | None = self.__dict__.get(_INDEX)
        if index is None:
            index = {}
            for queue in self.root.walk():
                index.setdefault(queue.path, queue)  # the first, as a walk finds it
            object.__setattr__(self, _INDEX, index)
        return index

    def __getstate__(self) -> dict[str, object]:
        """Pickled without the index (it is rebuilt on the first look-up)."""
        return {k: v for k, v in self.__dict__.items() if k != _INDEX}

    def with_queue(self, updated: Q) -> Self:
        """A copy with the queue at ``updated.path`` replaced (children included)."""
        return replace(self, root=_replace_in_tree(self.root, updated))  # type: ignore[type-var]


def _is_leaf(queue: QueueNode) -> bool:
    return bool(getattr(queue, "is_leaf", not queue.children))


def _replace_in_tree(node: Q, updated: Q) -> Q:
    if node.path == updated.path:
        return updated
    if not updated.path.startswith(node.path + "."):
        return node
    children = tuple(_replace_in_tree(c, updated) for c in node.children)
    return replace(node, children=children)  # type: ignore[type-var]

"""Branch scopes of conditionals: which samples an operator defined inside an ``if`` on a DataNode sees.

A scope is the tuple of branches (condition, side) the graph definition is nested in. The graph
asks this module, for every operator it adds, to route the operator's inputs into the current scope
(``route``: split them by each condition they were defined outside of) and for the node whose length
is the scope's batch size (``batch_node``). The conditions themselves live in
``jaxdali.pipeline.conditionals``; this module only knows that they can ``split`` a node.
"""

from __future__ import annotations

import threading
from typing import Any, Sequence

__all__ = ["Branch", "AtScope", "current_scope", "merging", "route", "batch_node"]


class Branch:
    """One side of one conditional."""

    __slots__ = ("condition", "side")

    def __init__(self, condition: Any, side: bool):
        self.condition = condition
        self.side = side


class _Scopes(threading.local):
    def __init__(self):
        self.stack: list[Branch] = []
        self.merging = False


_scopes = _Scopes()


def current_scope() -> tuple[Branch, ...]:
    """The branches the graph definition is inside now (empty outside every DataNode ``if``)."""
    return tuple(_scopes.stack)


class AtScope:
    """Context manager: define operators in ``scope``. With ``merging=True`` the operator's inputs are
    taken as they are: a merge joins nodes of the scope's branches, which lie inside it."""

    def __init__(self, scope: Sequence[Branch], merging: bool = False):
        self._scope = list(scope)
        self._merging = merging

    def __enter__(self):
        self._saved = _scopes.stack, _scopes.merging
        _scopes.stack, _scopes.merging = self._scope, self._merging

    def __exit__(self, *exc):
        _scopes.stack, _scopes.merging = self._saved


def merging() -> bool:
    """Whether the operator being added joins branches (its inputs are not routed)."""
    return _scopes.merging


def route(node: Any, scope: tuple[Branch, ...]) -> Any:
    """``node`` as seen from ``scope``: split by every condition between its own scope and ``scope``."""
    own = node.scope
    if own == scope:
        return node
    if len(own) > len(scope) or scope[:len(own)] != own:
        where = own[-1].condition.origin if own else "outside every conditional"
        raise ValueError(
            f"DataNode {node.name!r} was computed inside a branch of the `if` at {where} and is used outside that "
            "branch; assign the variable in both branches (or before the `if`) so that it can be merged")
    for branch in scope[len(own):]:
        node = branch.condition.split(node)[0 if branch.side else 1]
    return node


def batch_node(scope: tuple[Branch, ...]) -> Any:
    """A node whose length is the batch size of ``scope`` (the innermost predicate, split by itself)."""
    branch = scope[-1]
    return branch.condition.sides[0 if branch.side else 1]

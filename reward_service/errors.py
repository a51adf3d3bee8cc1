"""The base of the server's own exceptions.

Every exception class the server defines derives from :class:`RewardServiceError` (usually next
to a builtin base such as ``ValueError`` or ``RuntimeError`` that says what kind of failure it
is), so that a caller can tell "ours" from a library's or Python's own. The client
(:mod:`reward_service.client.errors`) has its own tree, whose base has the same name: it
installs without the server, and a trainer catches the client's, server code this one.
"""

from __future__ import annotations


class RewardServiceError(Exception):
    """Base of every exception the reward-service server raises on purpose."""

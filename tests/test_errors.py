"""One server-side exception base: every public exception class the server defines derives from
:class:`reward_service.errors.RewardServiceError`; the client's tree stays its own (the client
installs without the server)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import reward_service
from reward_service.errors import RewardServiceError

#: Packages of the trainer side: they install alone and keep their own exceptions.
CLIENT_SIDE = ("reward_service.client", "reward_service.adapters")


def server_exception_classes() -> dict[str, type[BaseException]]:
    """``module.Class`` -> class for every exception class defined in a server module (private
    ones, ``_Name``, are control flow that never leaves its module)."""
    found = {}
    for info in pkgutil.walk_packages(reward_service.__path__, "reward_service."):
        if info.name.startswith(CLIENT_SIDE) or info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_server_exception_derives_from_the_one_base():
    classes = server_exception_classes()
    # the walk sees the exceptions of every layer (so the check below can fail)
    for name in (
        "reward_service.sandbox.base.SandboxError",
        "reward_service.dispatch.base.QueueFull",
        "reward_service.dispatch.base.BrokerUnavailable",
        "reward_service.api.errors.StoreUnavailable",
        "reward_service.completion.ExtractionError",
    ):
        assert name in classes
    assert len(classes) >= 15
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, RewardServiceError))
    assert outside == []


def test_the_base_keeps_each_class_kind_and_the_client_tree_apart():
    from reward_service.client import errors as client_errors
    from reward_service.dispatch.base import BatchTooLarge, QueueFull
    from reward_service.sandbox.base import SandboxError

    # the builtin base still says what kind of failure it is (callers catch ValueError etc.)
    assert issubclass(BatchTooLarge, ValueError) and issubclass(QueueFull, RuntimeError)
    assert issubclass(SandboxError, RuntimeError)
    # the client's exceptions are its own tree, not the server's
    client_classes = [
        c
        for c in vars(client_errors).values()
        if inspect.isclass(c) and issubclass(c, BaseException) and c.__module__ == client_errors.__name__
    ]
    assert client_classes
    assert not any(issubclass(c, RewardServiceError) for c in client_classes)

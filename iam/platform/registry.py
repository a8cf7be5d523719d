"""How `iam` reaches the apps without importing them: a `Registry` the apps fill in with a decorator at
the function's definition (`@outbox.handler("email")`, `@retention.sweep("deliveries")`,
`@metrics.backlog("push.delivery")`), so "go to definition" from the decorator finds the machinery and a
search for the name finds every function registered under it."""

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)


class Registry(dict[str, F]):
    """Name -> function, in registration order."""

    def register(self, name: str) -> Callable[[F], F]:
        def decorate(func: F) -> F:
            self[name] = func
            return func

        return decorate

"""One typed reader for the environment, so every setting is parsed the same way."""

import os
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _to_bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"not a boolean: {raw!r}")


def _to_list(raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


_PARSERS: dict[type, Callable[[str], Any]] = {
    bool: _to_bool,
    int: int,
    float: float,
    str: str,
    list: _to_list,
}


def env(key: str, default: Any = None, type: type = str) -> Any:
    raw = os.environ.get(key)
    if raw is None:
        return default
    try:
        return _PARSERS[type](raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{key}: {exc}") from exc

"""The release this checkout is, read from `pyproject.toml`, the one place it is written: the installed
package's metadata (`importlib.metadata`) says what was installed last, which an upgrade that skips
`pip install` leaves behind. Shown by the OpenAPI document (`info.version`) and `/metrics`
(`iam_build_info`)."""

import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
VERSION: str = tomllib.loads(PYPROJECT.read_text())["project"]["version"]

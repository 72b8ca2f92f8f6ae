"""An ``H2MT_*`` variable's text read as its setting's value (SettingsError when it is wrong)."""
from __future__ import annotations

from pathlib import Path


class SettingsError(ValueError):
    """A setting (an ``H2MT_*`` variable or option) has a value users can fix: one line."""


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def _parse(name: str, raw: str, kind):
    """An ``H2MT_*`` value as its field's type says: a number, a yes/no, a folder, a name that
    may be unset (set but empty: none), the checkpoint (a file, or auto/none), else the text."""
    if kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            raise SettingsError(f"H2MT_{name.upper()}={raw!r} is not a number") from None
    if kind is bool:
        return _parse_bool(name, raw)
    if kind == bool | None:  # a yes/no whose default depends on who runs (set but empty: that)
        return _parse_bool(name, raw) if raw.strip() else None
    if kind is Path:
        return Path(raw).expanduser()
    if kind == Path | None:  # a file that may be unset (set but empty: none)
        return Path(raw).expanduser() if raw.strip() else None
    if kind == Path | str | None:  # the checkpoint
        return raw if raw.lower() in ("auto", "none", "") else Path(raw)
    if kind == str | None:
        return raw.strip() or None
    return raw


def _parse_bool(name: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE or v in _FALSE:
        return v in _TRUE
    raise SettingsError(f"H2MT_{name.upper()}={raw!r} is not one of 1, 0, true, false, yes, no, "
                        "on, off")

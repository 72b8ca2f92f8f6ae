"""Where the project's files live: the data and cache folders, the shipped trained parts."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


APP_NAME = "h2mt-explorer"
# Where a Hugging Face Space mounts its persistent storage (when the Space has it).
SPACE_PERSISTENT_DIR = Path("/data")


def _project_root() -> Path:
    return Path(__file__).resolve().parents[2]


def _assets_dir() -> Path:
    """``assets/`` of a checkout, or its copy inside the installed package (``engine/assets``,
    put there by the wheel build: setup.py)."""
    checkout = _project_root() / "assets"
    if is_checkout() and checkout.is_dir():
        return checkout
    return Path(__file__).resolve().parents[1] / "assets"


def is_checkout(root: Path | None = None) -> bool:
    """Running from a source tree (pyproject.toml beside the packages), not from site-packages."""
    root = _project_root() if root is None else root
    return ((root / "pyproject.toml").is_file()
            and (root / "engine" / "settings" / "__init__.py").is_file())


def _writable(folder: Path) -> bool:
    """``folder`` exists and is writable, or could be created (its nearest existing ancestor is)."""
    for p in (folder, *folder.parents):
        if p.exists():
            return p.is_dir() and os.access(p, os.W_OK | os.X_OK)
    return False


def space_storage(environ=None, persistent: Path = SPACE_PERSISTENT_DIR) -> Path | None:
    """The persistent storage of a Hugging Face Space (``/data``) when this runs on a Space
    (``SPACE_ID`` set) that has it mounted and writable; None anywhere else."""
    env = os.environ if environ is None else environ
    if env.get("SPACE_ID") and persistent.is_dir() and os.access(persistent, os.W_OK | os.X_OK):
        return persistent
    return None


def default_data_dir(environ=None, *, root: Path | None = None,
                     persistent: Path = SPACE_PERSISTENT_DIR) -> Path:
    """Where the library lives when ``H2MT_DATA_DIR`` is not set, the first that is writable of:
    a Space's persistent storage (``/data/h2mt-explorer``); ``./data`` of a checkout (the quick
    start); the user's data folder (``$XDG_DATA_HOME/h2mt-explorer``, else
    ``~/.local/share/h2mt-explorer``); a folder in the temporary directory (lost at reboot)."""
    env = os.environ if environ is None else environ
    root = _project_root() if root is None else root
    candidates = []
    space = space_storage(env, persistent)
    if space is not None:
        candidates.append(space / APP_NAME)
    if is_checkout(root):
        candidates.append(root / "data")
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_DATA_HOME") or (os.path.join(home, ".local", "share") if home else "")
    if xdg:
        candidates.append(Path(xdg) / APP_NAME)
    for c in candidates:
        if _writable(c):
            return c
    return Path(tempfile.gettempdir()) / APP_NAME


def default_cache_dir(environ=None, *, persistent: Path = SPACE_PERSISTENT_DIR) -> Path:
    """The dequantized backbone (and a fetched GGUF): a Space's persistent storage
    (``/data/h2mt-explorer/cache``, so a restart skips the download and the dequantization),
    else ``$XDG_CACHE_HOME/h2mt-explorer`` (``~/.cache``), else the temporary directory."""
    env = os.environ if environ is None else environ
    space = space_storage(env, persistent)
    if space is not None:
        return space / APP_NAME / "cache"
    home = env.get("HOME") or os.path.expanduser("~")
    xdg = env.get("XDG_CACHE_HOME") or (os.path.join(home, ".cache") if home else "")
    if xdg and _writable(Path(xdg) / APP_NAME):
        return Path(xdg) / APP_NAME
    return Path(tempfile.gettempdir()) / f"{APP_NAME}-cache"


# The trained parts for DEFAULT_BACKBONE that ship with the project (assets/MODEL_CARD.md).
SHIPPED_CHECKPOINT = _assets_dir() / "smollm2-135m-instruct.h2mt.safetensors"
# Learned fusion of the routing channels (trained on Debian documentation, assets/MODEL_CARD.md).
SHIPPED_FUSION = _assets_dir() / "fusion.json"
# The learned passage ranker of the quote (assets/PASSAGE_RANKER_CARD.md).
SHIPPED_PASSAGE_RANKER = _assets_dir() / "passage_ranker.json"
SHIPPED_ANSWER_CHECK = _assets_dir() / "answer_check.json"
SHIPPED_SHORT_ANSWER = _assets_dir() / "short_answer.json"

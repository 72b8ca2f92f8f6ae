"""Who may sign in and what each may do (issue 44).

Names and passwords come from ``H2MT_AUTH`` ("name:password,...", a quick start) and from
``H2MT_AUTH_FILE``, one ``name:scrypt$n$r$p$salt$hash`` line per person (salted scrypt hashes
from the standard library; ``manual-explorer --add-user NAME`` writes a line). Either turns
sign-in on. ``H2MT_ADMINS`` names the people who may upload and delete manuals; everyone signed
in may ask. Without sign-in everyone is an admin (a laptop on 127.0.0.1), and the app refuses to
listen on any other interface unless ``H2MT_OPEN=1`` (``check_listen``).

Written with hashlib because the standard library has the key derivation (scrypt) and a
constant-time comparison; a password library would add a dependency for the same two calls.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from engine.settings import Settings, SettingsError

SCHEME = "scrypt"
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 14, 8, 1  # 16 MiB a sign-in (its time: docs/results.md)
SALT_BYTES = 16
LOOPBACK_NAMES = ("localhost", "")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """``scrypt$n$r$p$salt$hash`` of ``password`` (hex), a fresh random salt by default."""
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P)
    return f"{SCHEME}${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches a ``hash_password`` string (False for a malformed one)."""
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != SCHEME:
            return False
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r),
                             p=int(p))
        return hmac.compare_digest(got, bytes.fromhex(digest))
    except ValueError:
        return False


def valid_name(name: str) -> bool:
    return bool(name) and name == name.strip() and not any(c in name for c in ":,\n\r")


@dataclass(frozen=True)
class Accounts:
    """The people who may sign in (``plain``: H2MT_AUTH's passwords, ``hashed``: the file's
    hashes) and the admins. ``enabled`` False: no sign-in, everyone may do everything."""
    plain: dict[str, str] = field(default_factory=dict, repr=False)
    hashed: dict[str, str] = field(default_factory=dict, repr=False)
    admins: frozenset[str] = frozenset()

    @property
    def enabled(self) -> bool:
        return bool(self.plain or self.hashed)

    @property
    def names(self) -> set[str]:
        return set(self.plain) | set(self.hashed)

    def check(self, name: str, password: str) -> bool:
        """Gradio's ``launch(auth=...)`` callable: the name signs in with this password."""
        if name in self.plain:
            return hmac.compare_digest(self.plain[name].encode(), (password or "").encode())
        if name in self.hashed:
            return verify_password(password or "", self.hashed[name])
        verify_password(password or "", _DUMMY)  # the same time for an unknown name
        return False

    def is_admin(self, name: str | None) -> bool:
        """May upload and delete: everyone without sign-in, else the admins."""
        return not self.enabled or (name is not None and name in self.admins)

    def sees_all(self, name: str | None) -> bool:
        """Sees every person's question history (admins; everyone without sign-in)."""
        return self.is_admin(name)

    @classmethod
    def from_settings(cls, settings: Settings) -> "Accounts":
        """Parse H2MT_AUTH and H2MT_AUTH_FILE (one line, naming the variable, for a bad entry;
        a password never appears in it)."""
        plain: dict[str, str] = {}
        for entry in filter(None, (e.strip() for e in (settings.auth or "").split(","))):
            name, sep, password = entry.partition(":")
            name = name.strip()
            if not sep or not valid_name(name) or not password:
                raise SettingsError("H2MT_AUTH must be name:password pairs separated by commas "
                                    f"(entry {len(plain) + 1} is not)")
            plain[name] = password
        hashed = read_auth_file(settings.auth_file) if settings.auth_file else {}
        admins = frozenset(a.strip() for a in settings.admins.split(",") if a.strip())
        return cls(plain, hashed, admins)


_DUMMY = hash_password("", salt=b"\0" * SALT_BYTES)


def read_auth_file(path: Path) -> dict[str, str]:
    """{name: hash} of an auth file (blank lines and ``#`` comments skipped)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise SettingsError(f"H2MT_AUTH_FILE={str(path)!r} cannot be read "
                            f"({e.strerror or type(e).__name__})") from None
    out = {}
    for i, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, stored = line.partition(":")
        if not sep or not valid_name(name) or not stored.startswith(SCHEME + "$"):
            raise SettingsError(f"H2MT_AUTH_FILE={str(path)!r} line {i} is not "
                                "name:scrypt$...: write it with manual-explorer --add-user")
        out[name] = stored
    return out


def add_user(path: Path, name: str, password: str) -> bool:
    """Write ``name``'s salted hash into the auth file (created mode 600; an existing line of
    the name replaced). True when the name was new."""
    if not valid_name(name):
        raise SettingsError(f"a name may not be empty or hold ':', ',' or spaces around it: "
                            f"{name!r}")
    if not password:
        raise SettingsError("an empty password is not accepted")
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    kept = [ln for ln in lines if ln.partition(":")[0].strip() != name]
    kept.append(f"{name}:{hash_password(password)}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(kept) + "\n")
    return len(kept) > len(lines)


def is_loopback(host: str) -> bool:
    """``host`` is this machine only (127.0.0.0/8, ::1, localhost)."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, accounts: Accounts, settings: Settings, *, share: bool = False
                 ) -> None:
    """Refuse (one line) to serve beyond this machine without sign-in, unless H2MT_OPEN=1."""
    if accounts.enabled or settings.open:
        return
    if share or not is_loopback(host):
        where = "a public share link" if share else f"{host}"
        raise SettingsError(
            f"refusing to serve on {where} without sign-in: set H2MT_AUTH or H2MT_AUTH_FILE "
            "(README, 'Sign-in'), or H2MT_OPEN=1 to serve everyone on purpose")

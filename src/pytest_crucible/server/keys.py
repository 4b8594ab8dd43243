"""API keys for ``crucible serve``: scoped to one workspace, stored only as a salted hash.

A key reads ``crk_<id>_<secret>``. The id is public (it names the key in listings and is
how a request finds its row); the secret is 32 random bytes, shown once at creation and
never stored: the ``api_keys`` row keeps a per-key random salt and HMAC-SHA256(salt, secret).
Every request looks its key up again (no cache), so a revocation takes effect at once.

This module never imports pytest or the web framework.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..store import StoreError, new_ulid, utc_now
from ..store.keys import KeyDatabase, count_active_keys, insert_key_row, key_row, key_rows, replace_key_hash, set_key_revoked

KEY_PREFIX = "crk"
SCOPES = ("runs:read", "kb:read", "feedback:write")
READ_SCOPES = ("kb:read", "runs:read")
WRITE_FEEDBACK_SCOPE = "feedback:write"
# The secret carries 256 random bits: no guess can find it, whatever a check costs, so a slow
# hash buys nothing and made every wrong key cost ~30 ms of CPU (a flood of them starved valid
# requests). A keyed SHA-256 with the per-key salt costs microseconds, and a leaked table still
# holds no secret. Keys created before (schema 9 and earlier) carry a PBKDF2 hash: it is checked
# the old way and replaced by the HMAC one on the key's first successful use (upgrade_legacy_hash).
_HASH_SCHEME = "hmac_sha256"
_LEGACY_SCHEME = "pbkdf2_sha256"
PBKDF2_ITERATIONS = 50_000  # of the legacy hashes; the count is stored with each one


class ApiKeyError(StoreError):
    """A key command that cannot be done; ``str()`` is the user-facing message."""


@dataclass(frozen=True)
class ApiKey:
    """An authenticated key: what a request may do, never the secret."""

    id: str
    workspace: str
    name: str | None
    scopes: tuple[str, ...]
    #: The stored hash is a legacy PBKDF2 one (see upgrade_legacy_hash); not part of the key's identity.
    legacy_hash: bool = field(default=False, compare=False, repr=False)

    def allows(self, *any_of: str) -> bool:
        return any(scope in self.scopes for scope in any_of)


def _hash_secret(secret: str, salt: bytes) -> str:
    return f"{_HASH_SCHEME}${hmac.new(salt, secret.encode('utf-8'), hashlib.sha256).hexdigest()}"


def _legacy_hash(secret: str, salt: bytes, iterations: int) -> str:
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode("utf-8"), salt, iterations)
    return f"{_LEGACY_SCHEME}${iterations}${digest.hex()}"


def _secret_matches(secret: str, salt_hex: str, stored: str) -> bool:
    """Whether ``secret`` is the one ``stored`` was made from, compared in constant time."""
    scheme, _, rest = stored.partition("$")
    salt = bytes.fromhex(salt_hex)
    if scheme == _HASH_SCHEME:
        return hmac.compare_digest(_hash_secret(secret, salt), stored)
    iterations, _, _ = rest.partition("$")
    if scheme == _LEGACY_SCHEME and iterations.isdigit():
        return hmac.compare_digest(_legacy_hash(secret, salt, int(iterations)), stored)
    return False


def check_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(scopes))  # keep the order given, drop repeats
    unknown = [scope for scope in chosen if scope not in SCOPES]
    if unknown or not chosen:
        what = f"unknown scope {unknown[0]!r}" if unknown else "a key needs at least one scope"
        raise ApiKeyError(f"--scope: {what}\nHINT: scopes are {', '.join(SCOPES)} (repeat --scope for several)")
    return chosen


def create_key(db: KeyDatabase, *, workspace: str, scopes: Iterable[str], name: str | None = None) -> tuple[dict[str, Any], str]:
    """Store a new key; returns (its public row, the full key). The full key is never stored."""
    if not workspace or not workspace.strip():
        raise ApiKeyError("--workspace: a key belongs to one workspace\nHINT: pass --workspace NAME (`crucible runs --all-workspaces` shows them)")
    chosen = check_scopes(scopes)
    key_id, secret, salt = new_ulid(), secrets.token_urlsafe(32), secrets.token_bytes(16)
    row = {"id": key_id, "workspace": workspace, "name": name, "scopes": json.dumps(list(chosen)),
           "salt": salt.hex(), "key_hash": _hash_secret(secret, salt), "created_at": utc_now(), "revoked_at": None}
    insert_key_row(db, row)
    return _public(row), f"{KEY_PREFIX}_{key_id}_{secret}"


def list_keys(db: KeyDatabase, *, workspace: str | None = None) -> list[dict[str, Any]]:
    """Keys, oldest first, without salt or hash."""
    return [_public(row) for row in key_rows(db, workspace=workspace)]


def revoke_key(db: KeyDatabase, ref: str) -> tuple[dict[str, Any], bool]:
    """Revoke by key id (or by the full key); returns (the key's row, whether this call revoked it)."""
    parsed = parse_key(ref)
    key_id = parsed[0] if parsed else ref
    row = key_row(db, key_id)
    if row is None:
        raise ApiKeyError(f"no API key with id {key_id}\nHINT: `crucible keys list` shows the keys and their ids")
    if row["revoked_at"]:
        return _public(row), False
    row["revoked_at"] = utc_now()
    set_key_revoked(db, key_id, row["revoked_at"])
    return _public(row), True


def active_key_count(db: KeyDatabase) -> int:
    return count_active_keys(db)


def parse_key(token: str) -> tuple[str, str] | None:
    """``crk_<id>_<secret>`` -> (id, secret); None for anything else."""
    prefix, _, rest = token.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or not key_id or not secret:
        return None
    return key_id, secret


def authenticate(db: KeyDatabase, token: str) -> ApiKey | None:
    """The live key ``token`` names, or None (malformed, unknown, revoked or wrong secret alike)."""
    parsed = parse_key(token)
    row = key_row(db, parsed[0]) if parsed else None
    if parsed is None or row is None:
        # Spend the same hashing time as a real check, so a response's timing does not tell key ids apart.
        _hash_secret(token, b"\0" * 16)
        return None
    if not _secret_matches(parsed[1], row["salt"], row["key_hash"]) or row["revoked_at"]:
        return None
    return ApiKey(id=row["id"], workspace=row["workspace"], name=row["name"], scopes=tuple(json.loads(row["scopes"])),
                  legacy_hash=not row["key_hash"].startswith(f"{_HASH_SCHEME}$"))


def upgrade_legacy_hash(db: KeyDatabase, token: str) -> bool:
    """Replace the legacy PBKDF2 hash of the key ``token`` names by its HMAC hash, once the key
    authenticated: it then costs what any key costs. Returns whether the row was rewritten (not when
    the token does not authenticate, the hash is already HMAC, or another process changed it first).
    ``db`` must be writable."""
    parsed = parse_key(token)
    row = key_row(db, parsed[0]) if parsed else None
    if parsed is None or row is None or not row["key_hash"].startswith(f"{_LEGACY_SCHEME}$"):
        return False
    secret = parsed[1]
    if not _secret_matches(secret, row["salt"], row["key_hash"]):
        return False
    # The same salt: only the hash changes, and only if no other process changed it meanwhile.
    return replace_key_hash(db, row["id"], old=row["key_hash"], new=_hash_secret(secret, bytes.fromhex(row["salt"])))


def _public(row: dict[str, Any]) -> dict[str, Any]:
    scopes = row["scopes"]
    return {"id": row["id"], "workspace": row["workspace"], "name": row["name"],
            "scopes": json.loads(scopes) if isinstance(scopes, str) else list(scopes),
            "createdAt": row["created_at"], "revokedAt": row["revoked_at"]}

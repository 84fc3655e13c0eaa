"""API keys for the HTTP service: per-knowledge-base grants and a clearance for RESTRICTED.

A key is shown once, when it is created; the root keeps only its SHA-256 (``.ragspine-keys.json``,
mode 0600), so a leaked key file grants nothing. A key carries the knowledge bases it may use
(names under the root, or ``*``), whether it may read and write, and whether it is cleared for
RESTRICTED chunks (R1: a key without clearance never receives one).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ragspine.errors import InvalidArgumentError

KEYS_FILE = ".ragspine-keys.json"
KEY_PREFIX = "rsk"
ALL_KNOWLEDGE_BASES = "*"


@dataclass(frozen=True)
class ApiKey:
    key_id: str
    digest: str
    kbs: tuple[str, ...]
    read: bool
    write: bool
    clearance: bool
    created_at: str
    revoked: bool = False
    label: str = ""

    def describe(self) -> dict[str, Any]:
        """Everything but the digest."""
        return {k: v for k, v in asdict(self).items() if k != "digest"}


@dataclass(frozen=True)
class Access:
    """What a request may do: the key's grants, or everything under ``--no-auth``."""

    kbs: tuple[str, ...] = (ALL_KNOWLEDGE_BASES,)
    read: bool = True
    write: bool = True
    clearance: bool = True

    @classmethod
    def of(cls, key: ApiKey) -> Access:
        return cls(key.kbs, key.read, key.write, key.clearance)

    def grants(self, kb: str) -> bool:
        return ALL_KNOWLEDGE_BASES in self.kbs or kb in self.kbs


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def check_kb_names(names: Sequence[str]) -> tuple[str, ...]:
    """Knowledge-base names as a key may name them: plain directory names, or ``*``."""
    cleaned = tuple(n.strip() for n in names if n.strip())
    if not cleaned:
        raise InvalidArgumentError("a key needs at least one knowledge base (--kb NAME or '*')")
    for name in cleaned:
        if name != ALL_KNOWLEDGE_BASES and not is_kb_name(name):
            raise InvalidArgumentError(
                f"{name!r} is not a knowledge-base name (letters, digits, '-', '_', '.')"
            )
    return cleaned


def is_kb_name(name: str) -> bool:
    return (
        bool(name)
        and len(name) <= 128
        and not name.startswith(".")
        and all(c.isalnum() or c in "-_." for c in name)
    )


class KeyStore:
    """The keys of one knowledge-base root; every change rewrites the file atomically under a
    lock, so concurrent ``ragspine keys`` commands and a running server agree."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.path = self.root / KEYS_FILE

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / (KEYS_FILE + ".lock"), "a+b") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def records(self) -> list[ApiKey]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"{self.path} is unreadable: {exc}") from exc
        return [ApiKey(**{**k, "kbs": tuple(k["kbs"])}) for k in raw.get("keys", [])]

    def _write(self, keys: Sequence[ApiKey]) -> None:
        staging = self.path.with_suffix(".tmp")
        payload = {"keys": [asdict(k) for k in keys]}
        descriptor = os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
        os.replace(staging, self.path)

    def create(
        self,
        kbs: Sequence[str],
        *,
        read: bool = True,
        write: bool = False,
        clearance: bool = False,
        label: str = "",
    ) -> tuple[ApiKey, str]:
        """A new key and its secret (shown once)."""
        if not (read or write):
            raise InvalidArgumentError("a key must be allowed to read, write, or both")
        key_id = secrets.token_hex(4)
        secret = f"{KEY_PREFIX}_{key_id}_{secrets.token_urlsafe(24)}"
        key = ApiKey(
            key_id=key_id,
            digest=_digest(secret),
            kbs=check_kb_names(kbs),
            read=read,
            write=write,
            clearance=clearance,
            created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            label=label,
        )
        with self._locked():
            self._write([*self.records(), key])
        return key, secret

    def revoke(self, key_id: str) -> ApiKey:
        with self._locked():
            keys = self.records()
            found = [k for k in keys if k.key_id == key_id]
            if not found:
                raise InvalidArgumentError(f"no key {key_id!r} under {self.root}")
            revoked = ApiKey(**{**asdict(found[0]), "revoked": True})
            self._write([revoked if k.key_id == key_id else k for k in keys])
        return revoked

    def authenticate(self, secret: str) -> ApiKey | None:
        """The live key whose secret this is, else None (compared in constant time)."""
        parts = secret.split("_")
        if len(parts) < 3 or parts[0] != KEY_PREFIX:
            return None
        digest = _digest(secret)
        for key in self.records():
            if key.key_id == parts[1] and hmac.compare_digest(key.digest, digest):
                return None if key.revoked else key
        return None

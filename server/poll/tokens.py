"""A learner's poll token: issued by the server for one room, signed, so a client cannot mint its own.

A token is 11 random URL-safe characters (the nonce) and 16 of an HMAC-SHA-256 over the room's code and the nonce,
keyed by the deployment's secret. Checking one needs no storage (the signature says it is the server's, and for
which room), so a client that makes up tokens counts no answer, and one room's token counts in no other room.

The secret: ATTENTION_LAB_POLL_SECRET when it is set (every replica given the same), else a random one made once
per deployment and kept where the rooms are (in Redis: shared by every replica, and kept with the rooms by the
append-only file; in this process's memory: this process's). A secret that changes (Redis restarted empty) only
makes the page issue new tokens: the rooms, and their answers, went with it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

SECRET_ENV = "ATTENTION_LAB_POLL_SECRET"
NONCE_LENGTH = 11  # secrets.token_urlsafe(8)
SIGNATURE_LENGTH = 16  # 12 bytes of the HMAC, base64url: 96 bits a forger would have to guess
LENGTH = NONCE_LENGTH + SIGNATURE_LENGTH
_TOKEN = re.compile(f"[A-Za-z0-9_-]{{{LENGTH}}}")


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def _signature(secret: str, code: str, nonce: str) -> str:
    mac = hmac.new(secret.encode(), f"{code}:{nonce}".encode(), hashlib.sha256).digest()[:12]
    return base64.urlsafe_b64encode(mac).decode()


def issue(secret: str, code: str) -> str:
    """A new token for room `code`: nothing about the person, only that this server gave it for this room."""
    nonce = secrets.token_urlsafe(8)
    return nonce + _signature(secret, code, nonce)


def looks_like(token: str) -> bool:
    """Whether `token` has a token's shape (a cheap check before any signature, and before any storage is read)."""
    return bool(_TOKEN.fullmatch(token or ""))


def is_valid(secret: str, code: str, token: str) -> bool:
    """Whether the server issued `token` for room `code`."""
    if not looks_like(token):
        return False
    nonce, signature = token[:NONCE_LENGTH], token[NONCE_LENGTH:]
    return hmac.compare_digest(signature, _signature(secret, code, nonce))

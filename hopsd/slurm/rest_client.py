"""Talking to slurmrestd: one HTTP request in, a JSON document or a typed error out.

slurmrestd answers every call with a JSON body whose ``errors`` list carries
Slurm's own error number and message, also on HTTP 200 (a submission refused
by the controller) and on the 4xx/5xx codes it maps them to. This module turns
those, an unreachable URL, a timeout and missing or bad credentials into the
port's typed errors, quoting Slurm's words. The token file is read on every
request, so an operator renews it without restarting hopsd.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from hopsd.slurm.classify import Failure, failure_of
from hopsd.slurm.errors import (
    SlurmAuthError,
    SlurmCommandError,
    SlurmError,
    SlurmJobNotFoundError,
    SlurmParseError,
    SlurmTimeoutError,
    SlurmUnavailableError,
)

MAX_TOKEN_BYTES = 16 * 1024
DATA_PARSERS = ("v0.0.40", "v0.0.41", "v0.0.42")


@dataclass
class RestClient:
    """HTTP access to slurmrestd's ``/slurm/<version>/...`` paths with a JWT.

    ``token_file`` holds the token (``SLURM_JWT=...`` as ``scontrol token``
    prints it, or the bare token). ``transport`` is for tests that must not
    open sockets; production uses httpx's default.
    """

    url: str
    token_file: str
    version: str = "v0.0.42"
    timeout_s: float = 30.0
    transport: httpx.BaseTransport | None = None
    _client: httpx.Client | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.version not in DATA_PARSERS:
            raise ValueError(f"slurmrestd data parser {self.version!r} not in {DATA_PARSERS}")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"slurmrestd URL {self.url!r} must start with http:// or https://")

    def path(self, tail: str) -> str:
        """``/slurm/<version>/<tail>``."""
        return f"/slurm/{self.version}/{tail.lstrip('/')}"

    def get(self, tail: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self.request("GET", self.path(tail), params=params)

    def post(self, tail: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.request("POST", self.path(tail), body=body)

    def delete(self, tail: str, params: Mapping[str, str] | None = None) -> dict[str, Any]:
        return self.request("DELETE", self.path(tail), params=params)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Send one request; the decoded reply, or the typed error it stands for."""
        what = (method, path)
        headers = {"X-SLURM-USER-TOKEN": read_token(self.token_file)}
        try:
            reply = self._http().request(
                method, path, params=params, json=body, headers=headers, timeout=self.timeout_s
            )
        except httpx.TimeoutException as exc:
            raise SlurmTimeoutError(
                f"slurmrestd at {self.url} gave no answer to {method} {path} "
                f"within {self.timeout_s:g} s"
            ) from exc
        except httpx.TransportError as exc:
            raise SlurmUnavailableError(
                f"slurmrestd at {self.url} is unreachable ({method} {path}): {exc}"
            ) from exc
        return decode_reply(what, reply.status_code, reply.text)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(base_url=self.url, transport=self.transport)
        return self._client


def read_token(token_file: str) -> str:
    """The JWT in ``token_file``; a missing or empty file is an authentication error."""
    try:
        raw = Path(token_file).read_bytes()[: MAX_TOKEN_BYTES + 1]
    except OSError as exc:
        raise SlurmAuthError(
            f"cannot read the slurmrestd token file {token_file}: {exc.strerror or exc}"
        ) from exc
    if len(raw) > MAX_TOKEN_BYTES:
        raise SlurmAuthError(f"slurmrestd token file {token_file} is larger than a token")
    text = raw.decode("ascii", errors="replace").strip()
    if text.startswith("SLURM_JWT="):
        text = text.split("=", 1)[1].strip()
    if not text or any(c.isspace() or not c.isprintable() for c in text):
        raise SlurmAuthError(f"slurmrestd token file {token_file} holds no token")
    return text


def decode_reply(what: tuple[str, str], status: int, text: str) -> dict[str, Any]:
    """The JSON document of a reply, or the typed error its status and ``errors`` mean."""
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise _error_without_json(what, status, text)
    errors = [e for e in doc.get("errors") or [] if isinstance(e, Mapping)]
    if errors or status >= 400:
        raise error_for(what, status, errors, text)
    return doc


def error_for(
    what: tuple[str, str], status: int, errors: list[Mapping[str, Any]], text: str
) -> SlurmError:
    """The typed error of a reply that carries Slurm ``errors`` (or a failing status)."""
    said = "; ".join(_describe(e) for e in errors) or f"HTTP {status}"
    failure = failure_of(said, {e.get("error_number") for e in errors})
    if status == 401 or failure is Failure.AUTH:
        return SlurmAuthError(f"slurmrestd refused the token ({' '.join(what)}): {said}")
    if failure is Failure.UNAVAILABLE:
        return SlurmUnavailableError(f"{' '.join(what)}: {said}")
    if failure is Failure.NOT_FOUND:
        return SlurmJobNotFoundError(what, status, said)
    return SlurmCommandError(what, status, said)


def _error_without_json(what: tuple[str, str], status: int, text: str) -> SlurmError:
    """A reply that is not slurmrestd's JSON: a proxy, a wrong URL, or no token at all."""
    said = " ".join(text.split())[:300] or "(empty reply)"
    if status == 401:
        return SlurmAuthError(f"slurmrestd refused the request ({' '.join(what)}): {said}")
    if status in (502, 503, 504):
        return SlurmUnavailableError(f"{' '.join(what)}: HTTP {status}: {said}")
    if status >= 400:
        return SlurmCommandError(what, status, f"HTTP {status}: {said}")
    return SlurmParseError(f"{' '.join(what)}: reply is not a JSON object: {said}")


def _describe(err: Mapping[str, Any]) -> str:
    """``error: description`` in Slurm's words (``Invalid job id specified: Unable to ...``)."""
    parts = [str(err[k]) for k in ("error", "description") if err.get(k)]
    return ": ".join(parts) or json.dumps(dict(err))

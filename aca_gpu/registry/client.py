"""OCI distribution API client over `requests`: tags (paginated), manifests, blobs, bearer auth.

Enough of the distribution spec to discover tags and read an image's config, against Docker Hub,
nvcr.io, GHCR or a private registry. ACR goes through `aca_gpu/azure/acr.py` instead (same
`RegistrySource` contract).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urljoin

import requests

from aca_gpu.errors import AuthError, CloudError, InfraError, NotFound
from aca_gpu.registry.auth import Challenge, TokenCache, parse_challenge, unreachable
from aca_gpu.registry.images import ALL_MANIFEST_TYPES, Manifest, sha256_digest

DOCKER_HUB_ALIASES = {"docker.io", "index.docker.io", "registry.hub.docker.com", "registry-1.docker.io"}
DOCKER_HUB_API = "registry-1.docker.io"
DEFAULT_PAGE_SIZE = 1000
MAX_PAGES = 1000  # a registry that never stops paginating is a bug, not a reason to spin forever

_NEXT_LINK = re.compile(r"<([^>]+)>\s*;\s*rel=\"?next\"?")


def is_docker_hub(registry: str | None) -> bool:
    return registry is None or registry.split("://")[-1].rstrip("/") in DOCKER_HUB_ALIASES


def base_url(registry: str | None) -> str:
    """`https://host[:port]` for a registry name; `http://` only when spelled out (a local registry)."""
    if is_docker_hub(registry):
        return f"https://{DOCKER_HUB_API}"
    assert registry is not None
    if registry.startswith(("http://", "https://")):
        return registry.rstrip("/")
    return f"https://{registry.rstrip('/')}"


def normalize_repository(registry: str | None, repository: str) -> str:
    """Docker Hub keeps official images under `library/`: `ubuntu` means `library/ubuntu` there."""
    repository = repository.strip("/")
    if is_docker_hub(registry) and "/" not in repository:
        return f"library/{repository}"
    return repository


class RegistryClient:
    """One registry; implements `RegistrySource`. Tokens are fetched on the first 401 and cached."""

    def __init__(
        self,
        registry: str | None = None,
        *,
        username: str | None = None,
        password: str | None = None,
        verify: bool | str = True,
        timeout: float = 30.0,
        page_size: int = DEFAULT_PAGE_SIZE,
        session: requests.Session | None = None,
    ) -> None:
        self.registry = registry
        self.base = base_url(registry)
        self.page_size = page_size
        self._verify = verify
        self._timeout = timeout
        self._session = session or requests.Session()
        self._session.headers.setdefault("User-Agent", "acagpu")
        self._tokens = TokenCache(
            self._session, username=username, password=password, verify=verify, timeout=timeout
        )
        self._scope_auth: dict[str, dict[str, str]] = {}  # so page 2 does not start with a 401
        self.requests_sent = 0  # lets tests and benchmarks count round trips (pagination, token reuse)

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ----------------------------------------------------------------------------
    def _send(self, url: str, scope: str, headers: dict[str, str] | None = None) -> requests.Response:
        """GET with auth: reuse the scope's last credential, answer one 401 challenge, then AuthError."""
        auth_header = self._scope_auth.get(scope, {})
        for attempt in range(2):
            try:
                self.requests_sent += 1
                resp = self._session.get(
                    url,
                    headers={**(headers or {}), **auth_header},
                    verify=self._verify,
                    timeout=self._timeout,
                    allow_redirects=True,  # blobs are often served from a CDN behind a redirect
                )
            except requests.RequestException as exc:
                raise unreachable(f"registry {self.base}", exc) from exc
            if resp.status_code != 401:
                return resp
            if attempt == 1:
                break
            auth_header = self._scope_auth[scope] = self._answer(resp, scope)
        raise AuthError(
            f"registry {self.base} refused access to {scope}",
            hint="pass --username/--password (or a token) if the repository is private",
        )

    def _answer(self, resp: requests.Response, scope: str) -> dict[str, str]:
        header = resp.headers.get("WWW-Authenticate", "")
        try:
            challenge = parse_challenge(header)
        except ValueError as exc:
            raise AuthError(f"registry {self.base} answered 401 without a challenge") from exc
        if challenge.scheme == "basic":
            basic = self._tokens.basic_auth
            if basic is None:
                raise AuthError(f"registry {self.base} needs a username and password")
            prepared = requests.Request("GET", self.base, auth=basic).prepare()
            return {"Authorization": str(prepared.headers["Authorization"])}
        if challenge.scheme != "bearer":
            raise AuthError(f"registry {self.base} asks for unsupported auth scheme {challenge.scheme!r}")
        return {"Authorization": f"Bearer {self._tokens.token(challenge, _scope_for(challenge, scope))}"}

    def _check(self, resp: requests.Response, what: str) -> None:
        if resp.status_code == 404:
            raise NotFound(f"{what} not found on {self.base}")
        if resp.status_code >= 500 or resp.status_code == 429:  # the registry's trouble, not ours
            raise InfraError(f"registry {self.base} answered HTTP {resp.status_code} for {what}; try again")
        if resp.status_code >= 400:
            raise CloudError(f"registry {self.base} answered HTTP {resp.status_code} for {what}")

    # -- API ----------------------------------------------------------------------------------
    def ping(self) -> bool:
        """`GET /v2/`: True when the registry speaks the distribution API (authenticated if needed)."""
        resp = self._send(f"{self.base}/v2/", "registry:catalog:*")
        return resp.status_code == 200

    def iter_tag_pages(self, repository: str, page_size: int | None = None) -> Iterator[list[str]]:
        """Pages of `GET /v2/<repo>/tags/list?n=...`, following `Link: <...>; rel="next"`.

        Docker Hub, GHCR and distribution 3 paginate tags; distribution 2.8 answers in one page.
        """
        repository = normalize_repository(self.registry, repository)
        url = f"{self.base}/v2/{repository}/tags/list?n={page_size or self.page_size}"
        yield from self._pages(url, "tags", f"repository:{repository}:pull", f"repository {repository}")

    def iter_repository_pages(self, page_size: int | None = None) -> Iterator[list[str]]:
        """Pages of `GET /v2/_catalog?n=...` (where the registry allows listing repositories)."""
        url = f"{self.base}/v2/_catalog?n={page_size or self.page_size}"
        yield from self._pages(url, "repositories", "registry:catalog:*", "repository catalog")

    def _pages(self, url: str, key: str, scope: str, what: str) -> Iterator[list[str]]:
        next_url: str | None = url
        for _ in range(MAX_PAGES):
            if next_url is None:
                return
            resp = self._send(next_url, scope)
            self._check(resp, what)
            try:
                items = resp.json().get(key) or []
            except (ValueError, AttributeError) as exc:
                raise CloudError(f"registry {self.base} sent an unreadable {what} page") from exc
            yield [str(item) for item in items]
            next_url = _next_link(resp, next_url)
        raise CloudError(f"registry {self.base} kept paginating {what} past {MAX_PAGES} pages")

    def list_tags(self, repository: str) -> list[str]:
        return [tag for page in self.iter_tag_pages(repository) for tag in page]

    def list_repositories(self) -> list[str]:
        return [name for page in self.iter_repository_pages() for name in page]

    def get_manifest(self, repository: str, reference: str) -> Manifest:
        """A manifest or index by tag or digest, with the digest checked against its bytes."""
        repository = normalize_repository(self.registry, repository)
        resp = self._send(
            f"{self.base}/v2/{repository}/manifests/{reference}",
            f"repository:{repository}:pull",
            {"Accept": ", ".join(ALL_MANIFEST_TYPES)},
        )
        self._check(resp, f"manifest {repository}:{reference}")
        expected = reference if reference.startswith("sha256:") else resp.headers.get("Docker-Content-Digest")
        return Manifest.from_bytes(resp.content, resp.headers.get("Content-Type"), expected)

    def get_blob(self, repository: str, digest: str) -> bytes:
        repository = normalize_repository(self.registry, repository)
        resp = self._send(f"{self.base}/v2/{repository}/blobs/{digest}", f"repository:{repository}:pull")
        self._check(resp, f"blob {digest} in {repository}")
        if digest.startswith("sha256:") and sha256_digest(resp.content) != digest:
            raise CloudError(f"blob {digest} in {repository} does not match its digest")
        return resp.content


def _scope_for(challenge: Challenge, wanted: str) -> str:
    """Prefer the scope the registry asked for; Docker Hub omits it on /v2/, so fall back to ours."""
    return challenge.params.get("scope") or wanted


def _next_link(resp: requests.Response, current: str) -> str | None:
    header = resp.headers.get("Link")
    if not header:
        return None
    match = _NEXT_LINK.search(header)
    if not match:
        return None
    return urljoin(current, str(match.group(1)))

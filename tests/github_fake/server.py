"""A GitHub REST API on loopback for the tests, checked against GitHub's OpenAPI description.

Every request is validated with openapi-core against ``@octokit/openapi`` (path, parameters,
body); an invalid one is answered 422 like GitHub and recorded in ``invalid``. Responses are
built from GitHub's own example objects and validated too (``invalid_responses``), so a
reporter tested here speaks the real API. Faults (5xx, rate limits, slow answers) are
scripted per request to exercise retries.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests
from openapi_core import OpenAPI
from openapi_core.contrib.requests import RequestsOpenAPIRequest, RequestsOpenAPIResponse

from .payloads import example
from .spec import response_example, served_spec

# Limits real GitHub enforces that the OpenAPI description does not spell out.
MAX_COMMENT_CHARS = 65536
MAX_STATUS_DESCRIPTION = 140
_DOCS = "https://docs.github.com/rest"


@dataclass
class Fault:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=lambda: {"message": "Server Error"})
    delay: float = 0.0
    method: str | None = None  # only requests with this method consume the fault
    after: bool = False  # carry the request out, then answer with the fault (a lost answer)


@dataclass
class Recorded:
    method: str
    path: str
    body: Any
    headers: dict[str, str]
    status: int
    at: float


def _explain(error: Exception) -> str:
    """openapi-core's message plus the schema errors underneath, without the whole instance."""
    causes = getattr(error.__cause__, "schema_errors", None) or ()
    details = [f"{'/'.join(str(p) for p in c.absolute_path) or '<root>'}: {c.message[:200]}" for c in causes]
    head = type(error).__name__ + ": " + str(error).split(" not valid for schema")[0][:200]
    return head + (" [" + "; ".join(details) + "]" if details else "")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"/repos/([^/]+)/([^/]+)/statuses/([0-9a-f]{40})"), "create_status"),
    ("GET", re.compile(r"/repos/([^/]+)/([^/]+)/issues/(\d+)/comments"), "list_comments"),
    ("POST", re.compile(r"/repos/([^/]+)/([^/]+)/issues/(\d+)/comments"), "create_comment"),
    ("PATCH", re.compile(r"/repos/([^/]+)/([^/]+)/issues/comments/(\d+)"), "update_comment"),
    ("GET", re.compile(r"/repos/([^/]+)/([^/]+)/pulls/(\d+)"), "get_pull"),
    ("POST", re.compile(r"/repos/([^/]+)/([^/]+)/commits/([0-9a-f]{40})/comments"), "create_commit_comment"),
    ("GET", re.compile(r"/repos/([^/]+)/([^/]+)/compare/([0-9a-f]{40}\.\.\.[0-9a-f]{40})"),
     "compare_commits"),
    ("GET", re.compile(r"/app"), "get_app"),
    ("POST", re.compile(r"/app/installations/(\d+)/access_tokens"), "create_installation_token"),
    ("GET", re.compile(r"/repos/([^/]+)/([^/]+)/installation"), "get_repo_installation"),
    ("GET", re.compile(r"/user"), "get_user"),
)
# What only an App's JWT may call; everything else wants a token.
_APP_ROUTES = re.compile(r"/app(/.*)?|/repos/[^/]+/[^/]+/installation")


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class FakeApp:
    """A GitHub App installed on every repository: its public key checks the JWTs it is sent."""

    public_key: Any  # cryptography RSAPublicKey
    app_id: int = 4242
    slug: str = "bsdkm-ci"
    installation_id: int = 31337
    token_ttl_s: float = 3600.0  # GitHub's is an hour; a test makes it short to see a refresh

    def check_jwt(self, token: str, now: float) -> str | None:
        """Why GitHub would refuse this App JWT (None: it is good)."""
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        parts = token.split(".")
        if len(parts) != 3:
            return "not a JWT"
        try:
            header, claims = json.loads(_b64(parts[0])), json.loads(_b64(parts[1]))
            self.public_key.verify(_b64(parts[2]), f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(),
                                   hashes.SHA256())
        except (ValueError, InvalidSignature):
            return "bad signature or encoding"
        if header.get("alg") != "RS256":
            return f"alg {header.get('alg')!r}, not RS256"
        if str(claims.get("iss")) != str(self.app_id):
            return f"iss {claims.get('iss')!r} is not this App"
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "iat and exp must be integers"
        if exp <= now:
            return "expired"
        if iat > now + 60:
            return "issued in the future"
        if exp - iat > 660 or exp - now > 600:
            return "'exp' too far in the future (at most 10 minutes)"
        return None


class FakeGitHub:
    def __init__(self, token: str = "ghp_fake_token_for_tests", validate_responses: bool = True,
                 close_after_answer: bool = False) -> None:
        self.token = token
        self.validate_responses = validate_responses
        # HTTP/1.0: the connection is closed after every answer, as a server ending idle keep-alives does.
        self.close_after_answer = close_after_answer
        self.openapi = OpenAPI.from_dict(served_spec())
        self.lock = threading.Lock()
        self.requests: list[Recorded] = []
        self.invalid: list[str] = []
        self.invalid_responses: list[str] = []
        self.statuses: list[dict[str, Any]] = []
        self.comments: dict[int, dict[str, Any]] = {}  # id -> comment
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        # "owner/repo" -> its linear history, oldest first: what compare answers from
        self.histories: dict[str, list[str]] = {}
        self.commit_comments: list[dict[str, Any]] = []  # POST .../commits/{sha}/comments, in order
        self.app: FakeApp | None = None
        self.installation_tokens: dict[str, float] = {}  # token -> expiry (epoch seconds)
        self.expired_uses: list[str] = []  # requests that came with an expired installation token
        self.auth_refusals: list[str] = []  # why a JWT or a token was refused
        self.token_login = "bsdkm-ci[bot]"  # whom GET /user names for the personal token
        self.faults: deque[Fault] = deque()
        self._next_id = 1000
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(_Handler):
            github = fake
            protocol_version = "HTTP/1.0" if fake.close_after_answer else "HTTP/1.1"

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-github", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "FakeGitHub not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # --- scenario helpers ---------------------------------------------------------------------

    def add_pull(self, webhook_payload: dict[str, Any]) -> None:
        """Serve GET /pulls/{n} for the PR in a pull_request webhook payload (as GitHub would)."""
        pr = copy.deepcopy(webhook_payload["pull_request"])
        # The webhook example predates auto-merge; GET /pulls/{n} always carries the field.
        pr.setdefault("auto_merge", None)
        with self.lock:
            self.pulls[(webhook_payload["repository"]["full_name"], pr["number"])] = pr

    def plant_comment(self, repo: str, number: int, body: str, login: str) -> int:
        """A comment someone else wrote (e.g. one that copies our hidden marker)."""
        owner, name = repo.split("/")
        with self.lock:
            comment = self._comment(owner, name, number, body)
            comment["user"]["login"] = login
            self.comments[comment["id"]] = comment
        return int(comment["id"])

    def install_app(self, app: FakeApp) -> FakeApp:
        """Serve a GitHub App; comments made with its tokens are its bot's, like GitHub's."""
        with self.lock:
            self.app = app
        return app

    def _authorized(self, path: str, auth: str) -> str | None:
        """Why this request's credentials are refused (None: accepted)."""
        scheme, _, credential = auth.partition(" ")
        if scheme not in ("Bearer", "token") or not credential:
            return "no credentials"
        now = time.time()
        if _APP_ROUTES.fullmatch(path):
            if self.app is None:
                return "no GitHub App here"
            return self.app.check_jwt(credential, now)
        if credential == self.token:
            return None
        with self.lock:
            expiry = self.installation_tokens.get(credential)
            if expiry is not None and expiry <= now:
                self.expired_uses.append(path)
                return "installation token expired"
        return None if expiry is not None else "Bad credentials"

    def fail_next(self, *faults: Fault) -> None:
        with self.lock:
            self.faults.extend(faults)

    def comments_on(self, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.comments.values() if c["issue_url"].endswith(f"/issues/{number}")]

    def latest_statuses(self, sha: str) -> dict[str, dict[str, Any]]:
        """context -> the last status posted for that commit (what GitHub shows)."""
        with self.lock:
            return {s["context"]: s for s in self.statuses if s["url"].endswith(sha)}

    def calls(self, method: str, fragment: str = "") -> list[Recorded]:
        with self.lock:
            return [r for r in self.requests if r.method == method and fragment in r.path]

    # --- request handling ---------------------------------------------------------------------

    def take_fault(self, method: str) -> Fault | None:
        with self.lock:
            for fault in list(self.faults):
                if fault.method in (None, method):
                    self.faults.remove(fault)
                    return fault
        return None

    def validate_request(self, method: str, url: str, headers: dict[str, str], body: bytes) -> str | None:
        prepared = requests.Request(method, url, headers=headers, data=body or None).prepare()
        try:
            self.openapi.validate_request(RequestsOpenAPIRequest(prepared))
        except Exception as e:  # openapi-core raises several unrelated classes; all mean "invalid"
            return f"{method} {url}: {_explain(e)}"
        return None

    def validate_response(
        self, method: str, url: str, headers: dict[str, str], body: bytes, status: int, answer: Any
    ) -> None:
        prepared = requests.Request(method, url, headers=headers, data=body or None).prepare()
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(answer).encode()
        response.headers["Content-Type"] = "application/json"
        try:
            self.openapi.validate_response(
                RequestsOpenAPIRequest(prepared), RequestsOpenAPIResponse(response)
            )
        except Exception as e:  # any failure means our fake drifted from GitHub's description
            with self.lock:
                self.invalid_responses.append(f"{method} {url} -> {status}: {_explain(e)}")

    def route(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
        for route_method, pattern, name in _ROUTES:
            match = pattern.fullmatch(path)
            if route_method == method and match:
                return getattr(self, name)(*match.groups(), payload=payload)
        return 404, {"message": "Not Found", "documentation_url": _DOCS}

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def create_status(self, owner: str, repo: str, sha: str, payload: Any) -> tuple[int, Any]:
        description = payload.get("description") or ""
        if len(description) > MAX_STATUS_DESCRIPTION:
            return 422, {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "Status",
                        "code": "custom",
                        "field": "description",
                        "message": "description is too long (maximum is 140 characters)",
                    }
                ],
            }
        user = example("issue_comment", "created")["comment"]["user"]
        with self.lock:
            status = {
                "url": f"{self.url}/repos/{owner}/{repo}/statuses/{sha}",
                "avatar_url": None,
                "id": self._new_id(),
                "node_id": f"SC_{self._next_id}",
                "state": payload["state"],
                "description": payload.get("description"),
                "target_url": payload.get("target_url"),
                "context": payload.get("context", "default"),
                "created_at": _now(),
                "updated_at": _now(),
                "creator": user,
            }
            self.statuses.append(status)
        return 201, status

    def _comment(self, owner: str, repo: str, number: int, body: str) -> dict[str, Any]:
        comment = example("issue_comment", "created")["comment"]
        cid = self._new_id()
        comment.update(
            id=cid,
            node_id=f"IC_{cid}",
            url=f"{self.url}/repos/{owner}/{repo}/issues/comments/{cid}",
            html_url=f"https://github.com/{owner}/{repo}/pull/{number}#issuecomment-{cid}",
            issue_url=f"{self.url}/repos/{owner}/{repo}/issues/{number}",
            body=body,
            created_at=_now(),
            updated_at=_now(),
            author_association="NONE",
        )
        comment["user"]["login"] = "bsdkm-ci[bot]"
        return comment

    def create_commit_comment(self, owner: str, repo: str, sha: str, payload: Any) -> tuple[int, Any]:
        if len(payload["body"]) > MAX_COMMENT_CHARS:
            return 422, {"message": "Validation Failed", "documentation_url": _DOCS}
        comment = example("commit_comment", "created")["comment"]
        with self.lock:
            cid = self._new_id()
            comment.update(id=cid, node_id=f"CC_{cid}", body=payload["body"], commit_id=sha,
                           url=f"{self.url}/repos/{owner}/{repo}/comments/{cid}",
                           html_url=f"https://github.com/{owner}/{repo}/commit/{sha}#commitcomment-{cid}",
                           path=payload.get("path"), position=payload.get("position"),
                           line=payload.get("line"), created_at=_now(), updated_at=_now())
            comment["user"]["login"] = "bsdkm-ci[bot]"
            self.commit_comments.append(comment)
        return 201, comment

    def list_comments(self, owner: str, repo: str, number: str, payload: Any) -> tuple[int, Any]:
        return 200, sorted(self.comments_on(int(number)), key=lambda c: c["id"])

    def create_comment(self, owner: str, repo: str, number: str, payload: Any) -> tuple[int, Any]:
        if len(payload["body"]) > MAX_COMMENT_CHARS:
            return 422, {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "IssueComment",
                        "code": "custom",
                        "field": "body",
                        "message": "body is too long (maximum is 65536 characters)",
                    }
                ],
            }
        with self.lock:
            comment = self._comment(owner, repo, int(number), payload["body"])
            self.comments[comment["id"]] = comment
        return 201, comment

    def update_comment(self, owner: str, repo: str, cid: str, payload: Any) -> tuple[int, Any]:
        if len(payload["body"]) > MAX_COMMENT_CHARS:
            return 422, {
                "message": "Validation Failed",
                "errors": [
                    {
                        "resource": "IssueComment",
                        "code": "custom",
                        "field": "body",
                        "message": "body is too long (maximum is 65536 characters)",
                    }
                ],
            }
        with self.lock:
            comment = self.comments.get(int(cid))
            if comment is None:
                return 404, {"message": "Not Found", "documentation_url": _DOCS}
            comment["body"] = payload["body"]
            comment["updated_at"] = _now()
            return 200, copy.deepcopy(comment)

    def get_app(self, payload: Any) -> tuple[int, Any]:
        assert self.app is not None  # _authorized let only a good JWT through
        app = response_example("/app", "get", "200")
        app.update(id=self.app.app_id, slug=self.app.slug, name=self.app.slug)
        return 200, app

    def get_repo_installation(self, owner: str, repo: str, payload: Any) -> tuple[int, Any]:
        assert self.app is not None
        found = response_example("/repos/{owner}/{repo}/installation", "get", "200")
        found.update(id=self.app.installation_id, app_id=self.app.app_id, app_slug=self.app.slug)
        return 200, found

    def create_installation_token(self, installation: str, payload: Any) -> tuple[int, Any]:
        assert self.app is not None
        if int(installation) != self.app.installation_id:
            return 404, {"message": "Not Found", "documentation_url": _DOCS}
        answer = response_example("/app/installations/{installation_id}/access_tokens", "post", "201")
        token = "ghs_" + secrets.token_hex(18)
        expiry = time.time() + self.app.token_ttl_s
        expires_at = datetime.fromtimestamp(expiry, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        answer.update(token=token, expires_at=expires_at)
        answer.pop("repositories", None)
        with self.lock:
            self.installation_tokens[token] = expiry
        return 201, answer

    def get_user(self, payload: Any) -> tuple[int, Any]:
        user = response_example("/user", "get", "200")
        user["login"] = self.token_login
        user["user_view_type"] = "private"  # the discriminator the description asks for
        return 200, user

    def compare_commits(self, owner: str, repo: str, basehead: str, payload: Any) -> tuple[int, Any]:
        base, head = basehead.split("...")
        with self.lock:
            history = list(self.histories.get(f"{owner}/{repo}", []))
        if base not in history or head not in history:
            return 404, {"message": "Not Found", "documentation_url": _DOCS}
        ahead = history.index(head) - history.index(base)
        answer = response_example("/repos/{owner}/{repo}/compare/{basehead}", "get", "200")
        answer.update(status="ahead" if ahead > 0 else "identical" if ahead == 0 else "behind",
                      ahead_by=max(ahead, 0), behind_by=max(-ahead, 0), total_commits=max(ahead, 0))
        return 200, answer

    def get_pull(self, owner: str, repo: str, number: str, payload: Any) -> tuple[int, Any]:
        with self.lock:
            pr = self.pulls.get((f"{owner}/{repo}", int(number)))
        if pr is None:
            return 404, {"message": "Not Found", "documentation_url": _DOCS}
        return 200, pr


class _Handler(BaseHTTPRequestHandler):
    github: FakeGitHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # keep test output quiet

    def _handle(self) -> None:
        gh = self.github
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0]
        headers = {k: v for k, v in self.headers.items()}
        url = gh.url + self.path
        status, answer, extra = self._answer(raw, path, headers, url)
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        with gh.lock:
            gh.requests.append(Recorded(self.command, path, body, headers, status, time.monotonic()))
        if 200 <= status < 300 and gh.validate_responses:
            gh.validate_response(self.command, url, headers, raw, status, answer)
        self._send(status, answer, extra)

    def _answer(
        self, raw: bytes, path: str, headers: dict[str, str], url: str
    ) -> tuple[int, Any, dict[str, str]]:
        gh = self.github
        if path == "/_fake/pulls" and self.command == "POST":
            gh.add_pull(json.loads(raw))  # test control, not GitHub's API: the next PR state
            return 204, None, {}
        if path == "/_fake/state" and self.command == "GET":
            with gh.lock:
                return (
                    200,
                    {"invalid": gh.invalid, "statuses": len(gh.statuses), "comments": len(gh.comments)},
                    {},
                )
        refused = gh._authorized(path, headers.get("Authorization", ""))
        if refused is not None:
            with gh.lock:
                gh.auth_refusals.append(f"{self.command} {path}: {refused}")
            return 401, {"message": "Bad credentials", "documentation_url": _DOCS}, {}
        fault = gh.take_fault(self.command)
        if fault is not None and not fault.after:
            time.sleep(fault.delay)
            return fault.status, fault.body, fault.headers
        error = gh.validate_request(self.command, url, headers, raw)
        if error is not None:
            with gh.lock:
                gh.invalid.append(error)
            return 422, {"message": "Validation Failed", "detail": error}, {}
        try:
            payload = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return 400, {"message": "Problems parsing JSON"}, {}
        status, answer = gh.route(self.command, path, payload)
        if fault is not None:  # done, but the caller never learns it
            time.sleep(fault.delay)
            return fault.status, fault.body, fault.headers
        return status, answer, {}

    def _send(self, status: int, answer: Any, extra: dict[str, str]) -> None:
        data = json.dumps(answer).encode() if answer is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-RateLimit-Limit", "5000")
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = _handle
    do_POST = _handle
    do_PATCH = _handle


def main() -> None:
    """Run the fake alone (for load runs, so its validation does not share a GIL with the load)."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description="loopback GitHub API for bsdkm-ci tests")
    parser.add_argument("--token", default="ghp_fake_token_for_tests")
    parser.add_argument("--no-response-validation", action="store_true")
    args = parser.parse_args()
    # Block the signals before the server threads exist so only sigwait sees them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    fake = FakeGitHub(args.token, validate_responses=not args.no_response_validation).start()
    print(fake.url, flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    fake.stop()


if __name__ == "__main__":
    main()


@contextmanager
def served(fake: FakeGitHub | None = None) -> Iterator[FakeGitHub]:
    """A started fake; once it stops, every request and answer must have kept to GitHub's description."""
    fake = (fake or FakeGitHub()).start()
    try:
        yield fake
    finally:
        fake.stop()
    assert fake.invalid == [], "a request did not follow GitHub's OpenAPI description"
    assert fake.invalid_responses == [], "the fake answered outside GitHub's OpenAPI description"

"""GitHub's official OpenAPI description (npm ``@octokit/openapi``), cut down to the routes we serve.

The full description is 13 MB; openapi-core needs minutes to index it, so we keep only the
operations the fake serves plus every component they reference (transitively).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

NODE_MODULES = Path(__file__).resolve().parents[1] / "node" / "node_modules"
OPENAPI_JSON = NODE_MODULES / "@octokit" / "openapi" / "generated" / "api.github.com.json"
WEBHOOK_EXAMPLES_JSON = NODE_MODULES / "@octokit" / "webhooks-examples" / "api.github.com" / "index.json"

# (path template, method) pairs the loopback server implements.
SERVED_OPERATIONS: tuple[tuple[str, str], ...] = (
    ("/repos/{owner}/{repo}/statuses/{sha}", "post"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "get"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "post"),
    ("/repos/{owner}/{repo}/issues/comments/{comment_id}", "patch"),
    ("/repos/{owner}/{repo}/pulls/{pull_number}", "get"),
    ("/repos/{owner}/{repo}/commits/{commit_sha}/comments", "post"),  # a bisection's culprit
    ("/repos/{owner}/{repo}/compare/{basehead}", "get"),  # ... checked inside its range first
    # A GitHub App: who it is, where it is installed, an installation token; a token's own user.
    ("/app", "get"),
    ("/app/installations/{installation_id}/access_tokens", "post"),
    ("/repos/{owner}/{repo}/installation", "get"),
    ("/user", "get"),
)


class SpecMissing(RuntimeError):
    """The npm test tools are not installed (run ``cd tests/node && npm install``)."""


def _require(path: Path) -> Path:
    if not path.is_file():
        raise SpecMissing(f"{path} not found: run `cd tests/node && npm install` (scripts/bootstrap.sh test)")
    return path


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str):
                found.add(ref)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _resolve_pointer(doc: dict[str, Any], ref: str) -> Any:
    node: Any = doc
    for part in ref.removeprefix("#/").split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def _set_pointer(doc: dict[str, Any], ref: str, value: Any) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in ref.removeprefix("#/").split("/")]
    node = doc
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


@lru_cache(maxsize=1)
def full_spec() -> dict[str, Any]:
    return json.loads(_require(OPENAPI_JSON).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def served_spec() -> dict[str, Any]:
    """A valid OpenAPI document holding only SERVED_OPERATIONS and what they reference."""
    full = full_spec()
    paths: dict[str, Any] = {}
    for template, method in SERVED_OPERATIONS:
        item = full["paths"][template]
        paths.setdefault(template, {})[method] = item[method]
    small: dict[str, Any] = {
        "openapi": full["openapi"],
        "info": full["info"],
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {},
    }
    pending = _refs(paths)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        target = _resolve_pointer(full, ref)
        _set_pointer(small, ref, target)
        pending |= _refs(target) - seen
    return small


def operation(template: str, method: str) -> dict[str, Any]:
    return served_spec()["paths"][template][method]


def response_example(template: str, method: str, status: str, name: str | None = None) -> dict[str, Any]:
    """The example GitHub's description gives for one response (the first one, or ``name``)."""
    import copy

    examples = operation(template, method)["responses"][status]["content"]["application/json"]["examples"]
    chosen = examples[name] if name else next(iter(examples.values()))
    ref = chosen.get("$ref")
    value = _resolve_pointer(full_spec(), ref)["value"] if ref else chosen["value"]
    return copy.deepcopy(value)


@lru_cache(maxsize=1)
def webhook_examples() -> dict[str, list[dict[str, Any]]]:
    """GitHub's example webhook payloads by event name (npm ``@octokit/webhooks-examples``)."""
    entries = json.loads(_require(WEBHOOK_EXAMPLES_JSON).read_text(encoding="utf-8"))
    return {e["name"]: e["examples"] for e in entries}

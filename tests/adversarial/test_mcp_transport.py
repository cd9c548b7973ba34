"""Loopback is not trust: `sleuth mcp --http` wants its token on every address (127.0.0.2 and a
long form of ::1 included, where it makes one up and says it once) and refuses a request whose
Host or Origin is not its own (DNS rebinding), whatever the bind address."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import pytest

from tests.mcp_support import CLIENT, McpProject

from . import figures


def post(url: str, headers: dict[str, str]) -> int:
    """A bare initialize POST (as a web page or a script would send it); its HTTP status."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "page", "version": "1"},
            },
        }
    ).encode()
    request = urllib.request.Request(url, data=body, method="POST")
    for name, value in {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        **headers,
    }.items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.parametrize("bind", ["127.0.0.2", "[0:0:0:0:0:0:0:1]"])
def test_loopback_is_not_trust_every_address_needs_the_token_and_its_own_host(
    tmp_path: Path, bind: str
) -> None:
    project = McpProject.create(tmp_path)
    with project.http_server(bind=bind, token=None) as served:
        bearer = {"Authorization": f"Bearer {served.token}"}
        statuses = {
            "no token": post(served.url, {}),
            "wrong token": post(served.url, {"Authorization": "Bearer " + "x" * 43}),
            "foreign Host": post(served.url, {**bearer, "Host": "attacker.example:80"}),
            "foreign Origin": post(served.url, {**bearer, "Origin": "http://attacker.example"}),
            "the token": post(served.url, bearer),
        }

        async def listed() -> list[str]:
            async with served.client(client_info=CLIENT) as client:
                return [t.name for t in (await client.list_tools()).tools]

        tools = anyio.run(listed)
    served_without = [k for k, v in statuses.items() if k != "the token" and v < 400]
    figures.count("http_unauthenticated_served", len(served_without))
    assert statuses == {
        "no token": 401,
        "wrong token": 401,
        "foreign Host": 421,
        "foreign Origin": 403,
        "the token": 200,
    }
    assert "read_lines" in tools

"""sftp_read's pipelined range against a real SFTP server that answers as OpenSSH's does not:
short answers before the end and a refusal partway through (the protocol allows both), and
answers longer than asked (a hostile host's).

The server is paramiko's own (SFTPServer over a Transport on a socket pair), serving one
file from memory; the client is the SFTPClient SSHHost uses.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import paramiko
import pytest

from sleuth.hosts.ssh import sftp_read

DATA = os.urandom(3 << 20)
SHORT = 10_000
"""The most bytes the short server answers per request (a client asks for 32 KiB)."""
REFUSED_FROM = 1 << 20
"""The refusing server fails every request at or past this offset."""


class _Login(paramiko.ServerInterface):
    def get_allowed_auths(self, username: str) -> str:
        return "password"

    def check_auth_password(self, username: str, password: str) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED


class _Blob(paramiko.SFTPHandle):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.asked: list[int] = []

    def read(self, offset: int, length: int) -> bytes | int:
        self.asked.append(offset)
        if self.mode == "refusing" and offset >= REFUSED_FROM:
            return paramiko.SFTP_FAILURE
        if self.mode == "short":
            length = min(length, SHORT)
        if self.mode == "long":  # more than asked: the next bytes too
            length += 1000
        return DATA[offset : offset + length]

    def stat(self) -> paramiko.SFTPAttributes:
        attrs = paramiko.SFTPAttributes()
        attrs.st_size = len(DATA)
        return attrs


class _Files(paramiko.SFTPServerInterface):
    opened: ClassVar[list[_Blob]] = []

    def open(self, path: str, flags: int, attr: Any) -> _Blob:
        blob = _Blob(path.strip("/"))
        self.opened.append(blob)
        return blob


@pytest.fixture
def client() -> Iterator[paramiko.SFTPClient]:
    near, far = socket.socketpair()
    server = paramiko.Transport(far)
    server.add_server_key(paramiko.ECDSAKey.generate())
    server.set_subsystem_handler("sftp", paramiko.SFTPServer, _Files)
    server.start_server(event=threading.Event(), server=_Login())
    transport = paramiko.Transport(near)
    transport.connect(username="u", password="p")
    sftp = paramiko.SFTPClient.from_transport(transport)
    assert sftp is not None
    _Files.opened.clear()
    yield sftp
    sftp.close()
    transport.close()
    server.close()


def test_short_answers_are_asked_again_until_the_range_is_whole(
    client: paramiko.SFTPClient,
) -> None:
    got = sftp_read.read(client, "short", 123_457, 1 << 20)
    assert got == DATA[123_457 : 123_457 + (1 << 20)]


def test_a_refusal_partway_is_raised_and_leaves_the_client_right_for_the_next_read(
    client: paramiko.SFTPClient,
) -> None:
    with pytest.raises(OSError):
        sftp_read.read(client, "refusing", REFUSED_FROM - 64 * 1024, 2 << 20)
    (refused,) = _Files.opened
    assert len(refused.asked) > 3  # requests were in flight past the refusal
    # The next read on the same client gets its own answers, none left over from the last.
    for offset in (0, 5000, 700_000):
        assert sftp_read.read(client, "whole", offset, 300_000) == DATA[offset : offset + 300_000]


def test_an_answer_longer_than_asked_is_cut_to_the_request(
    client: paramiko.SFTPClient,
) -> None:
    got = sftp_read.read(client, "long", 5000, 100_000)
    assert got == DATA[5000:105_000]


def test_the_end_of_the_file_ends_the_range(client: paramiko.SFTPClient) -> None:
    assert sftp_read.read(client, "whole", len(DATA) - 100, 1 << 20) == DATA[-100:]
    assert sftp_read.read(client, "whole", len(DATA) + 5, 1000) == b""

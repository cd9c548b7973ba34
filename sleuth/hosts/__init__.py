"""The host wing: where tools run. The Host protocol and the local host (`host`), SSH hosts
(`ssh/`), the sandbox of roots and limits (`policy`), the file reads beneath the roots that
tools make through it (`rooted`, with `posix_files` where the host has no Python, and the
typed results in `replies`), the wire to Sleuth's host program (`wire`), opening configured
hosts (`connect`), and the stdlib-only programs Sleuth sends to run on a host (`program/`,
among them `resident.py`, the host program itself). Nothing here imports the tools, the agent
or the faces above them."""

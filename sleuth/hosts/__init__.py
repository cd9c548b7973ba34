"""The host wing: where tools run. The Host protocol and the local host (`host`), SSH hosts
(`ssh/`), the sandbox of roots and limits (`policy`), opening configured hosts (`connect`),
and the stdlib-only programs Sleuth sends to run on a host (`program/`). Nothing here imports
the tools, the agent or the faces above them."""

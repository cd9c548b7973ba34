"""Real podman containers for tests and benchmarks, from a Debian root filesystem built here.

```python
rootfs = debian_rootfs()                     # built once with debootstrap, then reused
with Containers() as pods:
    name = pods.run(rootfs, ["sleep", "infinity"], volumes={"/models": ckpt_dir})
    pods.exec(name, ["sh", "-c", "echo hi > /only-here.txt"])
```

The tree is made by `debootstrap --variant=minbase --include=python3 bookworm` into
SLEUTH_ROOTFS_CACHE (default /var/cache/sleuth-tests) the first time (about a minute), and
every container runs it as an overlay (`--rootfs DIR:O`), so what a test writes inside stays
in that container and the cached tree stays clean. podman needs the setup .ci/podman-setup
writes (runc, cgroupfs, rlimits it may set); the README's Test command runs it. Outside CI a
machine without podman or debootstrap skips these tests; in CI (CI=true) they fail instead.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

CACHE = Path(os.environ.get("SLEUTH_ROOTFS_CACHE", "/var/cache/sleuth-tests"))
ROOTFS = CACHE / "rootfs-bookworm"
SETUP = Path(__file__).parent.parent / ".ci" / "podman-setup"
PODMAN = "podman"


def missing_reason() -> str | None:
    """Why real containers cannot run here, or None when they can."""
    for tool in ("podman", "runc", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is missing; apt-get install -y podman runc debootstrap, then {SETUP}"
    if not Path("/etc/containers/containers.conf").exists():
        return f"podman is not set up for this machine; run {SETUP}"
    return None


def debian_rootfs() -> Path:
    """The cached Debian tree with python3, built on first use (under a lock, so parallel
    test processes build it once)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "rootfs.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (ROOTFS / "usr" / "bin" / "python3").exists():
            building = CACHE / f"rootfs.building-{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            subprocess.run(
                [
                    "debootstrap",
                    "--variant=minbase",
                    "--include=python3",
                    "bookworm",
                    str(building),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            shutil.rmtree(ROOTFS, ignore_errors=True)
            building.rename(ROOTFS)
    return ROOTFS


def own_storage(folder: Path) -> Path:
    """A storage.conf whose containers no other podman user on this machine sees (point
    CONTAINERS_STORAGE_CONF at it): `ps` then lists exactly a test's containers."""
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "storage.conf"
    conf.write_text(
        f'[storage]\ndriver = "overlay"\ngraphroot = "{folder / "graph"}"\n'
        f'runroot = "{folder / "run"}"\n'
    )
    return conf


def podman(
    *args: str, check: bool = True, stdin: bytes | None = None, storage: Path | None = None
) -> str:
    env = {**os.environ, "CONTAINERS_STORAGE_CONF": str(storage)} if storage else None
    done = subprocess.run(
        [PODMAN, *args], input=stdin, capture_output=True, check=False, timeout=120, env=env
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)}: {done.stderr.decode(errors='replace')}")
    return done.stdout.decode()


class Containers:
    """Containers this test started, removed at its end."""

    def __init__(self, storage: Path | None = None) -> None:
        self.names: list[str] = []
        self.storage = storage
        """An own storage.conf (`own_storage`), or None for the machine's."""

    def run(
        self,
        rootfs: Path,
        command: Sequence[str],
        *,
        volumes: dict[str, Path] | None = None,
        name: str | None = None,
        detach: bool = True,
        extra: Sequence[str] = (),
    ) -> str:
        name = name or f"sleuth-test-{uuid.uuid4().hex[:10]}"
        mounts = [f"--volume={src}:{dst}:ro" for dst, src in (volumes or {}).items()]
        args = ["run", "--name", name, "--network=none", *mounts, *extra]
        args += ["--detach"] if detach else []
        self.names.append(name)
        podman(*args, "--rootfs", f"{rootfs}:O", *command, storage=self.storage)
        return name

    def exec(self, name: str, argv: Sequence[str], stdin: bytes | None = None) -> str:
        interactive = ["-i"] if stdin is not None else []
        return podman("exec", *interactive, name, *argv, stdin=stdin, storage=self.storage)

    def wait(self, name: str) -> None:
        podman("wait", name, check=False, storage=self.storage)

    def __enter__(self) -> Containers:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for name in self.names:
            podman("rm", "--force", "--time=0", name, check=False, storage=self.storage)

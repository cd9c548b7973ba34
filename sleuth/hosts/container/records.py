"""The one reader of what container runtimes say about a container: `inspect` JSON
(docker, podman, nerdctl) and `kubectl get pod -o json`, into plain fields.

```python
image_facts(target, json.loads(inspect_stdout))
# {'container_id': '3f2a...', 'image': 'lmsysorg/sglang:v0.5.4', 'image_id': 'sha256:...',
#  'image_digest': 'sha256:...', 'state': 'running'}
```
"""

from __future__ import annotations

from typing import Any

from sleuth.hosts.container.target import Target


def first(record: Any) -> dict[str, Any]:
    """`inspect` prints a list of one; kubectl an object."""
    if isinstance(record, list):
        return record[0] if record and isinstance(record[0], dict) else {}
    return record if isinstance(record, dict) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def image_facts(target: Target, record: Any) -> dict[str, str]:
    """Container id, image name, image id and digest, state, and which run of the container
    this is (`started`: its start time, or a pod container's id and restart count)."""
    found = first(record)
    if target.runtime == "kubectl":
        return _pod_facts(target, found)
    config = found.get("Config") or {}
    state = found.get("State") or {}
    image_id = _text(found.get("Image"))
    digest = _text(found.get("ImageDigest"))
    if not digest and image_id.startswith("sha256:"):
        digest = image_id  # docker and nerdctl name the image by its config digest
    return {
        "container_id": _text(found.get("Id")),
        "image": _text(found.get("ImageName"))
        or _text(config.get("Image"))
        or (f"rootfs {found['Rootfs']}" if _text(found.get("Rootfs")) else ""),
        "image_id": image_id,
        "image_digest": digest,
        "state": _text(state.get("Status")) if isinstance(state, dict) else _text(state),
        # A restart keeps the id and name but starts the container anew at another time.
        "started": _text(state.get("StartedAt")) if isinstance(state, dict) else "",
    }


def _pod_facts(target: Target, pod: dict[str, Any]) -> dict[str, str]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    wanted = target.container
    status: dict[str, Any] = next(
        (s for s in statuses if wanted is None or s.get("name") == wanted),
        {},
    )
    image_id = _text(status.get("imageID"))
    _, _, digest = image_id.rpartition("@")
    return {
        "container": _text(status.get("name")),
        "container_id": _text(status.get("containerID")),
        "image": _text(status.get("image")),
        "image_id": image_id,
        "image_digest": digest if digest.startswith("sha256:") else "",
        "state": next(iter(status.get("state") or {}), ""),
        # A restarted container of a pod gets a new containerID and a higher restartCount.
        "started": f"{_text(status.get('containerID'))}#{status.get('restartCount', '')}",
    }


def merged_log(streams: tuple[bytes, ...], tail: int) -> str:
    """A runtime's `logs --timestamps` output, the container's stdout and stderr lines back
    in the order they were written (each stream is in order; a stable sort by timestamp
    interleaves them), the timestamps dropped, the last `tail` lines kept."""
    stamped = []
    for stream in streams:
        for line in stream.decode(errors="replace").splitlines():
            stamp, _, text = line.partition(" ")
            stamped.append((stamp, text))
    stamped.sort(key=lambda pair: pair[0])
    return "".join(text + "\n" for _, text in stamped[-tail:])

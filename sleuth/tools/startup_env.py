"""Environment is code: which variable names make a program load, run or trust something else.

```python
start_up("LD_PRELOAD"), start_up("CUDA_VISIBLE_DEVICES")    # True, False
env_cover(["HF_HOME", "PYTHONPATH"], ["HF_*", "PYTHON*"]).start_up   # ["PYTHONPATH"]
```

A model's `env` for a launch is approved like a custom command: each name must be on the
host's `approve.env` list. A start-up name below is never approved by `--yes`, by a person's
`sleuth tool --yes`, by a prompt or by a glob: only a rule that names it exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase

STARTUP_ENV: tuple[str, ...] = (
    # The dynamic loader and libc: preload or audit libraries, charset and locale modules,
    # allocator and tunables (GLIBC_TUNABLES: CVE-2023-4911).
    "LD_*",
    "DYLD_*",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "MALLOC_*",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "RESOLV_HOST_CONF",
    # Shells: start-up files, exported functions, tracing and word splitting.
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    "PROMPT_COMMAND",
    "ZDOTDIR",
    "SHELL",
    # Interpreters: start-up code, module paths, options that load modules
    # (PYTHONWARNINGS can import a module; with BROWSER it runs a command).
    "PYTHON*",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_OPTIONS",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "LUA_INIT*",
    "LUA_PATH*",
    "LUA_CPATH*",
    "TCLLIBPATH",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    # Programs other programs start: pagers, editors, browsers, password prompts, compilers
    # (Triton and torch compile with $CC at run time).
    "BROWSER",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "LESSOPEN",
    "LESSCLOSE",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "CC",
    "CXX",
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    # Libraries loaded by name: OpenSSL engines and providers, CUDA and NCCL plugins.
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "CUDA_INJECTION*",
    "NVTX_INJECTION*",
    "NCCL_*_PLUGIN",
    # Where programs, homes, configuration and temporary files are found.
    "PATH",
    "HOME",
    "XDG_*",
    "TMPDIR",
    "GIT_*",
    # The engines' own code and programs: a logging config given to logging.config.dictConfig
    # (its "()" factory calls any callable), Triton's tool and library paths (it runs ptxas,
    # cuobjdump and nvdisasm, loads libdevice, libcuda and libhip) and its cache classes given
    # as MODULE:CLASS, the CUDA toolkit torch and FlashInfer compile with, nvcc's host compiler.
    "*_LOGGING_CONFIG_PATH",
    "TRITON_*_PATH",
    "TRITON_CACHE_MANAGER",
    "TRITON_REMOTE_CACHE_BACKEND",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_ROOT",
    "NVCC_CCBIN",
    # Code caches: compiled kernels, graphs and modules are loaded from there as found.
    "*_CACHE_DIR",
    "*_CACHE_ROOT",
    "*_CACHE_PATH",
    "TRITON_HOME",
    "TRITON_*_DIR",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_HOME",
    "HF_MODULES_CACHE",
    "FLASHINFER_WORKSPACE_BASE",
    # Where requests go and whom they trust: proxies, CA bundles, the Hub's address. A
    # server sends its inherited HF_TOKEN along.
    "*_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "AWS_CA_BUNDLE",
    "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
    "HF_ENDPOINT",
    "HUGGINGFACE_CO_RESOLVE_ENDPOINT",
)
"""Variables that make a program load, run or trust something they name (loader, interpreter,
shell start-up; the engines' code paths, code caches, proxies and CA bundles), as globs over
upper-case names."""


def start_up(name: str) -> bool:
    """Whether `name` makes a program load or run something it names."""
    upper = name.upper()
    return any(fnmatchcase(upper, pattern) for pattern in STARTUP_ENV)


@dataclass(frozen=True)
class EnvCover:
    """How a host's `approve.env` list covers the names a call sets."""

    listed: list[str] = field(default_factory=list)
    """The entries of the list that cover the names (for the rule an approval names)."""
    unlisted: list[str] = field(default_factory=list)
    """Ordinary names no entry covers: approved only by a person (never by `--yes`)."""
    start_up: list[str] = field(default_factory=list)
    """Start-up names the list does not name exactly: approved by nobody."""

    @property
    def covered(self) -> bool:
        return not self.unlisted and not self.start_up


def env_cover(names: list[str], allowed: list[str]) -> EnvCover:
    """Which of `names` the `allowed` entries (names, or prefixes ending in `*`) cover; a
    start-up name is covered only by its own exact entry."""
    listed: list[str] = []
    unlisted: list[str] = []
    startup: list[str] = []
    for name in sorted(names):
        if name in allowed:
            listed.append(name)
        elif start_up(name):
            startup.append(name)
        elif entry := next((a for a in allowed if a.endswith("*") and fnmatchcase(name, a)), None):
            listed.append(entry)
        else:
            unlisted.append(name)
    return EnvCover(sorted(set(listed)), unlisted, startup)

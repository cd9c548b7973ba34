"""Engine source trees: which one to read on a host, and what a grep of it found."""

from __future__ import annotations

from sleuth.agent.playbook.plan import Question, Report, Result
from sleuth.tools.environment.python_env import PythonEnv


def is_engine_path(path: str) -> bool:
    return any(
        part in ("sglang", "vllm") or part.startswith(("sglang-", "vllm-"))
        for part in path.lower().split("/")
    )


def engine_dir(env: Result, q: Question) -> str | None:
    """The engine source the question names, else an installed one grep may read (SGLang
    first, unless the question says vLLM)."""
    named = [p for p in q.paths if is_engine_path(p)]
    if named:
        return named[0]
    prefer = "vllm" if q.has("vllm") else "sglang"
    found = env.model(PythonEnv)
    packages = [
        p
        for p in (found.packages if found else [])
        if p.installed and p.inside_roots and p.path and p.name in ("sglang", "vllm")
    ]
    packages.sort(key=lambda p: p.name != prefer)
    return packages[0].path if packages else None


def engine_report(grep: Result, engine: str, what: str) -> Report:
    """A finding from a grep of `engine`: where `what` is mentioned, quoting the matching lines
    (a class definition first: it says more than a use)."""
    data = grep.data or {}
    matches, files = int(data.get("matches") or 0), list(data.get("files") or [])
    if matches:
        # The quotes are the output's match lines (`file:N:text`) of the files the data lists.
        prefixes = tuple(f"{name}:" for name in files)
        hits = [ln.strip() for ln in grep.output.splitlines() if ln.startswith(prefixes)]
        hits.sort(key=lambda ln: "class " not in ln)
        return Report(
            f"{engine} mentions {what} in {matches} line(s) across {len(files)} file(s)"
            f", e.g. {files[0]}.",
            "yes",
            0.8,
            [(grep, hit) for hit in hits[:3]],
        )
    return Report(
        f"{engine} has no mention of {what}.", "no", 0.6, [(grep, grep.line("no matches"))]
    )

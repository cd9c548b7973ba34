"""Engine support: where an engine's source mentions a feature or a flag."""

from __future__ import annotations

import re

from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, summary_text
from sleuth.agent.playbook.sources import engine_dir, engine_report

WORDS = ("flag", "support", "backend", "which option", "turns on", "enable", "kernel")


def feature_word(q: Question) -> str | None:
    """The feature a question asks about: a quoted word, a --flag, or a known feature's name."""
    quoted = re.findall(r"[\"'`]([^\"'`]{2,40})[\"'`]", q.text)
    if quoted:
        return str(quoted[0])
    flags = re.findall(r"--[a-z0-9][a-z0-9-]+", q.text)
    if flags:
        return str(flags[0])
    known = re.findall(
        r"\b(nvfp4|nextn|eagle3?|mtp|fp8|fp4|awq|gptq|cutlass|flashinfer|triton|"
        r"deepgemm|deep_gemm|marlin|trtllm|cudnn)\b",
        q.text,
        re.I,
    )
    return str(known[0]) if known else None


def feature_pattern(word: str) -> str:
    """grep's extended regular expression for `word`, `-` and `_` standing for each other and
    a flag's leading dashes dropped: `--speculative-algorithm` on the command line is
    `speculative_algorithm` in the code that reads it."""
    parts = re.split(r"[-_]", word.lstrip("-") or word)
    return "[-_]".join(re.sub(r"([.^$*+?()\[\]{}|\\])", r"\\\1", part) for part in parts)


def claims(q: Question) -> bool:
    """A support word, and an engine or a feature to look for: "which flag" alone is not."""
    return q.has(*WORDS) and (q.has("sglang", "vllm", "engine") or feature_word(q) is not None)


def plan_engine(q: Question) -> Plan:
    word = feature_word(q) or "speculative"
    (env,) = yield [Call("python_env", {"host": q.host})]
    engine = engine_dir(env, q)
    if engine is None:
        report = Report(
            f"No SGLang or vLLM source is readable on {q.host}: not installed, or "
            "installed outside the host's roots.",
            "unknown",
            0.6,
            [(env, env.line("sglang")), (env, env.line("vllm"))],
            [
                "Name the engine's source folder in the question, or add its install "
                "path to the host's roots in sleuth.toml."
            ],
        )
        yield [report]
        return summary_text([report])
    pattern = feature_pattern(word)
    (grep,) = yield [
        Call(
            "grep",
            {
                "host": q.host,
                "path": engine,
                "pattern": pattern,
                "ignore_case": True,
                "include_glob": "*.py",
                "max_matches": 20,
            },
        )
    ]
    report = engine_report(grep, engine, repr(word))
    yield [report]
    return summary_text([report])


FAMILY = Family(
    name="engine",
    help="engine support: where an engine's source mentions a feature or flag",
    plan=plan_engine,
    words=WORDS,
    claims=claims,
    rank=30,
)

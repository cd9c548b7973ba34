"""Environment: the engines and libraries installed on a host, and its GPUs."""

from __future__ import annotations

from sleuth.agent.playbook.plan import Call, Family, Plan, Question, Report, Result, summary_text
from sleuth.tools.environment.gpu_info import GPU
from sleuth.tools.environment.python_env import PythonEnv


def plan_env(q: Question) -> Plan:
    env, gpus = yield [Call("python_env", {"host": q.host}), Call("gpu_info", {"host": q.host})]
    reports = [_packages_report(q, env), _gpus_report(q, gpus)]
    yield reports
    return summary_text(reports)


def _packages_report(q: Question, env: Result) -> Report:
    found = env.model(PythonEnv)
    installed = [p for p in (found.packages if found else []) if p.installed]
    names = ", ".join(f"{p.name} {p.version or '?'}" for p in installed)
    return Report(
        f"Installed on {q.host}: {names}"
        if installed
        else f"None of sglang, vllm, torch, transformers or flashinfer is on {q.host}.",
        "yes" if installed else "no",
        0.9,
        [
            (env, env.line(installed[0].name) if installed else env.line("not installed")),
            (env, env.line("python")),
        ],
    )


def _gpus_report(q: Question, gpus: Result) -> Report:
    # gpu_info has no model of its own: its data is {"gpus": [GPU...], "reason": why none}.
    data = (gpus.data or {}) if not gpus.is_error else {}
    listed = [GPU.model_validate(g) for g in data.get("gpus", [])]
    if listed:
        claim = f"{len(listed)} GPU(s) on {q.host}:"
    elif "reason" in data:
        claim = f"No GPU on host {q.host}: {data['reason']}."
    else:  # the call failed: its error is what there is to say
        claim = gpus.output.splitlines()[0] if gpus.output else "GPU state unknown"
    return Report(claim, "yes" if listed else "no", 0.9, [(gpus, gpus.line("gpu"))])


FAMILY = Family(
    name="env",
    help="environment: installed sglang/vllm/torch/transformers/flashinfer and GPUs",
    plan=plan_env,
    words=("installed", "version", "gpu", "gpus", "nvidia", "cuda", "environment", "python"),
    rank=70,
)

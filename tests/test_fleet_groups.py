"""Host groups: `[groups]` in sleuth.toml, `--hosts` as a group, a pattern or a list, and the
errors that say how to fix an empty group or an unknown name. Host lists written short, and
what a fleet call masks before it compares outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.agent.fleet.grouping import Grouping, fleet_text
from sleuth.agent.fleet.normalise import Masker, localise
from sleuth.agent.playbook.drift import drift_reports
from sleuth.agent.playbook.plan import Result
from sleuth.config import ConfigError, load_settings
from sleuth.hosts.groups import select_hosts
from sleuth.transcripts.events import HostInfo
from sleuth.transcripts.hostlist import compress, expand
from sleuth.transcripts.results import ToolResult

SSH_CONFIG = """\
Host gpu-d1 gpu-d2 gpu-d3
    HostName 10.0.0.1
Host gpu-p1
    HostName 10.0.0.9
Host *.internal !bastion
    User ops
"""


def settings_with(tmp_path: Path, toml: str) -> Path:
    (tmp_path / "sleuth.toml").write_text(toml)
    (tmp_path / "ssh_config").write_text(SSH_CONFIG)
    return tmp_path / "sleuth.toml"


def test_groups_take_names_and_patterns_over_hosts_and_ssh_aliases(tmp_path: Path) -> None:
    path = settings_with(
        tmp_path,
        '[groups]\ndecode = ["gpu-d*"]\nall_p = ["gpu-p1", "gpu-x"]\n\n'
        '[groups.prefill]\nhosts = ["gpu-p*"]\nroots = ["/models"]\n'
        'python = "/opt/venv/bin/python"\n[groups.prefill.approve]\ntools = ["stop_server"]\n\n'
        '[hosts.gpu-x]\nssh = "gpu-x"\nroots = ["/srv"]\n',
    )
    settings = load_settings(path, cwd=tmp_path)
    assert settings.groups["decode"].hosts == ["gpu-d*"]  # the short form
    assert settings.groups["prefill"].approve.tools == ["stop_server"]
    chosen = select_hosts(settings, specs=["decode", "prefill"], ssh_config=tmp_path / "ssh_config")
    assert chosen.names == ["gpu-d1", "gpu-d2", "gpu-d3", "gpu-p1"]
    assert set(chosen.groups) == {"all", "decode", "prefill", "all_p"}
    assert chosen.groups["all"].members == ("gpu-d1", "gpu-d2", "gpu-d3", "gpu-p1")
    assert chosen.groups["all_p"].members == ("gpu-p1",)  # only the run's hosts
    # A member only ~/.ssh/config knows takes its group's roots and python.
    made = chosen.settings.hosts["gpu-p1"]
    assert (made.ssh, made.roots, made.python) == ("gpu-p1", ["/models"], "/opt/venv/bin/python")
    listed = select_hosts(
        settings, specs=["gpu-x,gpu-d2", "gpu-d[13]"], ssh_config=tmp_path / "ssh_config"
    )
    assert listed.names == ["gpu-x", "gpu-d2", "gpu-d1", "gpu-d3"]
    assert listed.target("decode") == "decode" and listed.target("gpu-x,gpu-d2") == "all"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("empty", "group 'empty' (['nothing-*'] in"),
        ("gpu-z*", "pattern 'gpu-z*' matches no host"),
        ("gpu-q7", "unknown host or group 'gpu-q7'"),
    ],
)
def test_an_empty_group_or_an_unknown_name_says_how_to_fix_it(
    tmp_path: Path, spec: str, says: str
) -> None:
    path = settings_with(tmp_path, '[groups]\nempty = ["nothing-*"]\n')
    settings = load_settings(path, cwd=tmp_path)
    with pytest.raises(ConfigError) as err:
        select_hosts(settings, specs=[spec], ssh_config=tmp_path / "ssh_config")
    message = str(err.value)
    assert says in message
    assert "gpu-d1" in message  # the hosts there are, to choose from
    assert "~/.ssh/config" in message


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ('[groups]\nall = ["gpu-*"]\n', "`all` is built in"),
        ('[groups]\ngpu1 = ["gpu-*"]\n[hosts.gpu1]\nssh = "gpu1"\n', "a host is named `gpu1`"),
        ('[groups.d]\nhosts = ["gpu-*"]\nroots = ["models"]\n', "must be absolute"),
        ("[groups.d]\nhosts = []\n", "groups.d.hosts"),
        (
            '[groups.d]\nhosts = ["g*"]\n[groups.d.approve]\ntools = ["launch_server"]\n',
            "approve.tools cannot list launch_server",
        ),
    ],
)
def test_a_group_that_cannot_mean_what_it_says_is_refused_at_its_line(
    tmp_path: Path, toml: str, says: str
) -> None:
    path = settings_with(tmp_path, toml)
    with pytest.raises(ConfigError, match=r"sleuth\.toml:[0-9]") as err:
        load_settings(path, cwd=tmp_path)
    assert says in str(err.value)


def test_host_lists_fold_into_ranges_and_unfold_exactly() -> None:
    names = [f"gpu-{i:02d}" for i in (1, 2, 3, 4, 7, 9, 10, 11)] + ["login", "gpu-9", "gpu-8"]
    short = compress(names)
    assert short == "gpu-[01-04,07,09-11], gpu-[8-9], login"
    assert sorted(expand([short])) == sorted(names)
    assert expand(["gpu-[01-03]", "gpu-02", "x"]) == ["gpu-01", "gpu-02", "gpu-03", "x"]
    with pytest.raises(ValueError):
        expand(["gpu-[05-01]"])
    with pytest.raises(ValueError):
        expand(["gpu-[a-b]"])


def test_each_host_masks_its_own_name_roots_and_the_shared_volatile_parts() -> None:
    a = HostInfo(
        name="gpu-07", address="root@10.0.0.7:22", ssh="node7.cluster", roots=["/mnt/a/models"],
        real_roots=["/data/nvme0/models"],
    )  # fmt: skip
    b = HostInfo(name="gpu-08", address="root@10.0.0.8:22", ssh="node8", roots=["/srv/models"])
    out_a = (
        "python3 on gpu-07 (node7.cluster, 10.0.0.7) pid 4242 at 2026-05-01T10:00:03Z\n"
        "/data/nvme0/models/llama ok in 12.5 ms; 1,234 bytes over the wire\n"
        "GPU 0: H100, 1234/81559 MiB used, util 37%, driver 550.54.15\n"
        "gpu-070 and /mnt/a/models2 stay"
    )
    out_b = (
        "python3 on gpu-08 (node8, 10.0.0.8) pid 17 at 2026-05-02 11:12:13\n"
        "/srv/models/llama ok in 3 ms; 99 bytes over the wire\n"
        "GPU 0: H100, 0/81559 MiB used, util 0%, driver 550.54.15\n"
        "gpu-070 and /mnt/a/models2 stay"
    )
    masked = Masker.for_host(a)(out_a)
    assert masked == Masker.for_host(b)(out_b)
    assert Masker.for_host(b)("PID: 17, pid=18") == "PID: <pid>, pid=<pid>"
    assert "<root>/llama" in masked and "gpu-070" in masked and "/mnt/a/models2" in masked
    # What is not the host's own still counts: another driver is another answer.
    assert Masker.for_host(a)(out_a.replace("550.54.15", "535.1")) != masked


def test_a_root_token_in_a_fleet_input_names_each_hosts_own_root() -> None:
    info = HostInfo(name="gpu-01", roots=["/srv/gpu-01", "/data/models/"])
    raw = {"host": "gpu-01", "path": "<root2>/llama", "model_dir": "<root>", "pointer": "/x"}
    assert localise(raw, info) == {
        "host": "gpu-01",
        "path": "/data/models/llama",
        "model_dir": "/srv/gpu-01",
        "pointer": "/x",
    }
    assert localise({"path": "<root3>/x"}, info) == {"path": "<root3>/x"}  # no third root
    assert localise({"path": "<root>x"}, info) == {"path": "<root>x"}  # not a whole segment


def test_gpu_drift_is_the_driver_not_the_load() -> None:
    hosts = [f"gpu-{i:02d}" for i in range(1, 9)]
    grouping = Grouping("@decode", "gpu_info", hosts)
    for i, host in enumerate(hosts):
        driver = "535.104.05" if host == "gpu-03" else "550.54.15"
        output = (
            f"1 GPU(s) on {host}:\nGPU 0: NVIDIA H100 80GB HBM3, {1000 * i}/81559 MiB used, "
            f"util {7 * i}%, driver {driver}, compute capability 9.0\n"
        )
        info = HostInfo(name=host, roots=[f"/srv/{host}"])
        grouping.add(host, ToolResult(ok=True, output=output), Masker.for_host(info)(output))
    fleet = grouping.result()
    assert [(g.verdict, g.hosts) for g in fleet.groups] == [
        ("majority", [h for h in hosts if h != "gpu-03"]),
        ("outlier", ["gpu-03"]),
    ]
    result = Result("c1", fleet_text(fleet), False, fleet.model_dump(mode="json"))
    (report,) = drift_reports(result, "GPUs and driver")
    assert report.verdict == "no" and report.claim.startswith("gpu-03 differs")
    assert "driver 535.104.05" in report.claim and "driver 550.54.15" in report.claim

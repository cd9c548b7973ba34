"""The hosts file: defaults, the built-in local host, and errors that point at the line."""

from pathlib import Path

import pytest

from sleuth.config import ConfigError, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sleuth.toml"
    path.write_text(text)
    return path


def test_local_host_is_built_in_and_rooted_at_the_working_directory(tmp_path: Path) -> None:
    settings = load_settings(cwd=tmp_path)
    assert settings.hosts["local"].roots == [str(tmp_path)]
    assert settings.hosts["local"].ssh is None


def test_sleuth_toml_in_the_working_directory_is_found(tmp_path: Path) -> None:
    write(tmp_path, '[hosts.gpu1]\nssh = "gpu1"\nroots = ["/models"]\nallow = ["launch_server"]\n')
    settings = load_settings(cwd=tmp_path)
    assert settings.hosts["gpu1"].roots == ["/models"]
    assert settings.hosts["gpu1"].allow == ["launch_server"]
    assert settings.source == str(tmp_path / "sleuth.toml")


def test_wrong_type_names_file_line_and_key(tmp_path: Path) -> None:
    path = write(
        tmp_path, '[limits]\ntimeout_s = 5\n\n[hosts.gpu1]\nssh = "gpu1"\nroots = "/models"\n'
    )
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert f"{path}:6" in str(err.value)
    assert "hosts.gpu1.roots" in str(err.value)


def test_unknown_key_is_refused_with_its_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[hosts.gpu1]\nssh = "gpu1"\nrots = ["/models"]\n')
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert f"{path}:3" in str(err.value) and "rots" in str(err.value)


def test_invalid_toml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, '[hosts.gpu1]\nssh = "gpu1\n')
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert str(path) in str(err.value) and "line 2" in str(err.value)


def test_relative_root_and_missing_ssh_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, '[hosts.gpu1]\nssh = "gpu1"\nroots = ["models"]\n')
    with pytest.raises(ConfigError, match="must be absolute"):
        load_settings(path, cwd=tmp_path)
    path = write(tmp_path, '[hosts.gpu2]\nroots = ["/models"]\n')
    with pytest.raises(ConfigError, match=r"sleuth.toml:1: host `gpu2` needs `ssh"):
        load_settings(path, cwd=tmp_path)


@pytest.mark.parametrize(
    ("section", "key", "value", "line"),
    [
        ("limits", "timeout_s", "-5", 2),
        ("limits", "max_output_bytes", "0", 2),
        ("budget", "max_turns", "0", 2),
        ("budget", "max_cost_usd", "-1.0", 2),
        ("budget", "max_wall_s", "0.5", 2),
        ('prices."my-model"', "input", "-3.0", 2),
    ],
)
def test_a_limit_the_command_line_would_refuse_is_refused_with_its_line(
    tmp_path: Path, section: str, key: str, value: str, line: int
) -> None:
    # A negative timeout read files "longer than -5 s"; max_turns = 0 ran a turn and then
    # blamed the budget. The flags refuse these values, so the file does too.
    extra = "output = 1.0\n" if section.startswith("prices") else ""
    path = write(tmp_path, f"[{section}]\n{key} = {value}\n{extra}")
    with pytest.raises(ConfigError) as err:
        load_settings(path, cwd=tmp_path)
    assert f"{path}:{line}" in str(err.value), err.value
    assert key in str(err.value)

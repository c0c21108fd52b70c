"""doctor's access checks, judged for a real unprivileged user created for the test."""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.users import unix_user
from zerto_rewind.cli.doctor.access import User, access_checks, access_of, lookup_user


@pytest.fixture(scope="module")
def agent() -> Iterator[User]:
    """A real user that plays the agent; removed afterwards."""
    with unix_user("zr-doc-acc-") as entry:
        yield lookup_user(entry.pw_name)


@pytest.fixture
def root_dir(tmp_path: Path) -> Path:
    """A root-owned 0755 directory whose every ancestor the agent cannot write."""
    os.chmod(tmp_path, 0o755)
    for parent in tmp_path.parents:
        if parent == Path("/"):
            break
        os.chmod(parent, os.stat(parent).st_mode | 0o005)  # searchable, as /tmp is
    d = tmp_path / "guard"
    d.mkdir(mode=0o755)
    return d


def write(path: Path, mode: int, owner: int = 0, group: int = 0) -> Path:
    path.write_text("x")
    os.chown(path, owner, group)
    os.chmod(path, mode)
    return path


def test_a_root_file_in_a_root_directory_is_out_of_reach(root_dir: Path, agent: User) -> None:
    secret = write(root_dir / "secret", 0o600)
    config = write(root_dir / "config.json", 0o644)
    assert access_of(str(secret), agent) == access_of(str(secret), agent)
    assert not access_of(str(secret), agent).read
    assert not access_of(str(secret), agent).write
    assert access_of(str(config), agent).read
    assert not access_of(str(config), agent).write


def test_a_directory_the_agent_can_write_makes_every_file_in_it_writable(
    root_dir: Path, agent: User
) -> None:
    """mode 0777 on the directory: the file can be renamed away and replaced."""
    os.chmod(root_dir, 0o777)
    config = write(root_dir / "config.json", 0o644)
    access = access_of(str(config), agent)
    assert access.write
    assert str(root_dir) in access.why


def test_a_sticky_directory_protects_root_files_but_not_the_agents(
    root_dir: Path, agent: User
) -> None:
    os.chmod(root_dir, 0o1777)
    mine = write(root_dir / "root-owned", 0o644)
    theirs = write(root_dir / "agent-owned", 0o644, owner=agent.uid)
    assert not access_of(str(mine), agent).write
    assert access_of(str(theirs), agent).write


def test_group_bits_count_for_the_agents_groups(root_dir: Path, agent: User) -> None:
    group = pwd.getpwnam(agent.name).pw_gid
    shared = write(root_dir / "shared.sock", 0o660, group=group)
    assert access_of(str(shared), agent).write
    assert grp.getgrgid(group).gr_gid in agent.gids


def test_a_symlink_to_a_writable_file_is_writable(root_dir: Path, agent: User) -> None:
    target = write(root_dir / "real", 0o666)
    link = root_dir / "link"
    link.symlink_to(target)
    assert access_of(str(link), agent).write


def test_checks_fail_for_writable_guard_files_and_readable_credentials(
    root_dir: Path, agent: User
) -> None:
    """The report: fail for what the agent can change or read, pass for the rest."""
    safe = write(root_dir / "config.json", 0o600)
    weak = write(root_dir / "settings.json", 0o666)
    secret = write(root_dir / "zvm-secret", 0o644)
    mcp = write(root_dir / "mcp.json", 0o644)
    checks = access_checks(
        agent,
        guard_files={"config": str(safe), "hook settings": str(weak)},
        credentials={"ZVM secret": str(secret)},
        mcp_credentials=[(str(mcp), "vsphere", ["env VCENTER_PASSWORD"])],
    )
    status = {c.name: c.status for c in checks}
    assert status == {
        "guard file: config": "pass",
        "guard file: hook settings": "fail",
        "credential: ZVM secret": "fail",
        "credential: VM server in an MCP config": "fail",
    }
    joined = " ".join(c.detail for c in checks)
    assert "VCENTER_PASSWORD" in joined

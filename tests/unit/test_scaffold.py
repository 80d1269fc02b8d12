"""``tandem domain new``: the pack it writes installs as its own distribution, registers under the entry
point group, passes the conformance suite and its own tests; bad names and existing folders are refused."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import domains
from pipelines.domains.conformance import run_checks
from serve.domain_cli import main as domain_main
from serve.scaffold import files, scaffold, valid_name

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["", "a", "Notes", "9lives", "my-pack", "x" * 32, "has space", "ünï"])
def test_a_bad_name_is_refused(tmp_path: Path, name: str) -> None:
    assert not valid_name(name)
    with pytest.raises(ValueError, match="invalid pack name"):
        scaffold(name, tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["ab", "notes", "my_pack2", "x" * 31])
def test_a_good_name_is_accepted(name: str) -> None:
    assert valid_name(name)


def test_an_existing_folder_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError):
        scaffold("notes", tmp_path)
    assert domain_main(["new", "notes", "--dir", str(tmp_path)]) == 2
    assert "exists already" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "notes").iterdir()] == ["mine.txt"]


def test_every_file_is_written(tmp_path: Path) -> None:
    root = scaffold("notes", tmp_path)
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == sorted(files("notes"))
    assert 'notes = "tandem_notes.pack:DomainPack"' in (root / "pyproject.toml").read_text()
    assert "name: notes" in (root / "configs" / "notes.yaml").read_text()


@pytest.fixture
def in_process_pack(tmp_path: Path):
    """The scaffolded pack importable from its folder and registered in this process (no install)."""
    root = scaffold("notes", tmp_path)
    sys.path.insert(0, str(root))
    try:
        module = importlib.import_module("tandem_notes.pack")
        domains.register("notes", module.DomainPack)
        yield root, module
    finally:
        domains.unregister("notes")
        sys.path.remove(str(root))
        for mod in [m for m in sys.modules if m == "tandem_notes" or m.startswith("tandem_notes.")]:
            del sys.modules[mod]


def test_the_new_pack_passes_the_conformance_suite(in_process_pack) -> None:
    failed = [r for r in run_checks("notes") if not r.ok]
    assert failed == []


def test_the_new_pack_writes_exactly_once_and_refuses_another_users_record(in_process_pack) -> None:
    from pipelines.core.ports import MemoryLedger, ToolSession

    pack = domains.load_domain("notes")
    world = pack.new_world(7)
    tools = pack.tool_runner(world, MemoryLedger())
    a, b = list(world.users.values())[:2]
    record = a.records[0]
    session = ToolSession(session_id="s", authenticated_user_id=a.user_id, user_texts=[record])
    confirmed = session.confirm("archive_record", {"record_id": record}, "k1")  # the yes to this very card
    first = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    again = asyncio.run(tools.call("archive_record", {"record_id": record}, confirmed))
    assert first.observation.ok and not first.replayed
    assert again.replayed and again.observation == first.observation
    assert tools.world.records[record].status == "archived"
    other = ToolSession(session_id="s2", authenticated_user_id=a.user_id, user_texts=[b.records[0]])
    assert asyncio.run(tools.precheck("archive_record", {"record_id": b.records[0]}, other)) is not None


@pytest.mark.slow  # pip install and a pytest subprocess
def test_the_new_pack_installs_registers_and_passes_its_own_tests(tmp_path: Path) -> None:
    """The path a team takes: pip install the pack, `tandem domain check`, its own pytest run."""
    root = scaffold("notes", tmp_path)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(root)], check=True, capture_output=True, timeout=600)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, *args], env=env, cwd=root, capture_output=True, text=True,
                              timeout=600)

    listed = run("-m", "serve.cli", "domain", "list")
    # other installed packs (make install adds the airline example) may be listed too
    assert listed.returncode == 0 and {"coach", "notes", "support"} <= set(listed.stdout.split()), listed.stderr
    checked = run("-m", "serve.cli", "domain", "check", "notes")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "checks passed" in checked.stdout and "FAIL" not in checked.stdout
    own = run("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert own.returncode == 0, own.stdout[-3000:] + own.stderr[-2000:]
    assert " passed" in own.stdout and "failed" not in own.stdout


def test_new_writes_into_the_folder_out_names_and_a_wrong_flag_names_the_right_ones(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert domain_main(["new", "acme", "--out", str(tmp_path / "acme")]) == 0
    assert (tmp_path / "acme" / "tandem_acme" / "pack.py").is_file()
    assert domain_main(["new", "web", "--out", str(tmp_path / "web"), "--backend", "http"]) == 0
    assert (tmp_path / "web" / "tandem_web" / "service.py").is_file()
    for wrong in (["--path", "x"], ["--ou", "x"], ["--out", "x", "--dir", "y"]):
        with pytest.raises(SystemExit) as exit_:
            domain_main(["new", "acme", *wrong])
        assert exit_.value.code == 2
        assert "(its options: --backend, --dir, --out)" in capsys.readouterr().err

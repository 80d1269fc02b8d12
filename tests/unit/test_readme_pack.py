"""The README's pack section runs as written: every shell line of its ``bash`` block, in order, in a fresh
folder, with ``tandem`` and ``pip`` of a virtualenv of its own (it sees this environment's packages, so the
new pack is installed there, never here). The flags a line uses are the ones the CLI has.
"""

from __future__ import annotations

import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pack_lines(readme: str) -> list[str]:
    """The shell lines of the first ``bash`` block of the README's "Pipelines and domains" section (comments
    and blank lines left out)."""
    section = readme.split("## Pipelines and domains", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the pack section has a bash block"
    lines = [re.sub(r"\s+#.*$", "", line).strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_the_section_is_found_and_names_the_commands() -> None:
    lines = pack_lines((ROOT / "README.md").read_text())
    assert lines[0] == "tandem domain list"
    assert any(line.startswith("tandem domain new acme --out ./acme") for line in lines)
    assert any("tandem domain check acme" in line for line in lines)


@pytest.mark.slow  # a virtualenv and a pip install
def test_every_shell_line_of_the_readme_pack_section_runs_as_written(tmp_path: Path) -> None:
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, capture_output=True, timeout=300)
    child = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import site; print(site.getsitepackages()[0])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    # the child sees this environment's packages (Tandem and its engines) but installs into its own
    (Path(child) / "tandem-parent.pth").write_text(f"import site; site.addsitedir({site.getsitepackages()[0]!r})\n")
    tandem = env_dir / "bin" / "tandem"
    tandem.write_text(f"#!{env_dir / 'bin' / 'python'}\nimport sys\nfrom serve.cli import main\nsys.exit(main())\n")
    tandem.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{env_dir / 'bin'}{os.pathsep}{os.environ['PATH']}", "VIRTUAL_ENV": str(env_dir),
           "PYTHONPATH": str(ROOT), "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for line in pack_lines((ROOT / "README.md").read_text()):
        run = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{line}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
        if line.startswith("tandem domain list"):
            assert {"coach", "support"} <= set(run.stdout.split())
        if "tandem domain check acme" in line:
            assert "checks passed" in run.stdout and "FAIL" not in run.stdout, run.stdout
    assert (work / "acme" / "tandem_acme" / "pack.py").is_file()

"""``domain.paths``: a pack installed into its own folder resolves where the config is read and in every
process of the app (the app's runtime_env puts the folder in front of the workers' PYTHONPATH)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

from pipelines import domains
from serve.config import app_runtime_env, load_serve_file
from serve.deploy import deploy_schema

REPO = Path(__file__).resolve().parents[2]


def test_no_paths_leave_the_runtime_env_as_written() -> None:
    assert app_runtime_env({}, []) == {}
    assert app_runtime_env({"env_vars": {"A": "1"}}, []) == {"env_vars": {"A": "1"}}


def test_pack_paths_go_in_front_of_the_cluster_pythonpath() -> None:
    env = app_runtime_env({"env_vars": {"A": "1"}}, ["/opt/packs", "/srv/more"])
    assert env == {"env_vars": {"A": "1", "PYTHONPATH": os.pathsep.join(["/opt/packs", "/srv/more", "${PYTHONPATH}"])}}


def test_a_pythonpath_the_config_sets_is_kept_after_the_pack_paths() -> None:
    env = app_runtime_env({"env_vars": {"PYTHONPATH": "/mine"}, "pip": ["x"]}, ["/opt/packs"])
    assert env == {"env_vars": {"PYTHONPATH": os.pathsep.join(["/opt/packs", "/mine"])}, "pip": ["x"]}


@pytest.fixture
def pack_folder(tmp_path: Path):
    """A folder holding an installed pack's code and its dist-info (what ``pip install --target`` writes)."""
    folder = tmp_path / "site"
    (folder / "tandem_pathpack").mkdir(parents=True)
    (folder / "tandem_pathpack" / "__init__.py").write_text(
        "from pipelines.domains.support import build_support_domain as DomainPack\n")
    info = folder / "tandem_pathpack-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tandem-pathpack\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[tandem.domains]\npathpack = tandem_pathpack:DomainPack\n")
    yield folder
    while str(folder) in sys.path:
        sys.path.remove(str(folder))
    sys.modules.pop("tandem_pathpack", None)


def test_a_pack_outside_the_environment_resolves_through_its_path(tmp_path: Path, pack_folder: Path) -> None:
    raw = yaml.safe_load((REPO / "configs" / "embedded.yaml").read_text())
    raw["applications"][0]["args"]["domain"] = {"name": "pathpack"}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(Exception, match="unknown domain 'pathpack'"):
        load_serve_file(bad)
    raw["applications"][0]["args"]["domain"] = {"name": "pathpack", "paths": [str(pack_folder)]}
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(raw))
    sf = load_serve_file(good)
    assert "pathpack" in domains.pack_names()
    schema = deploy_schema(sf, http_host="127.0.0.1", http_port=8000, grpc_port=9000)
    env = schema.applications[0].runtime_env
    assert env["env_vars"]["PYTHONPATH"] == os.pathsep.join([str(pack_folder), "${PYTHONPATH}"])

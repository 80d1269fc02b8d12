"""``tandem k8s``: render KubeRay manifests from a profile, and validate any manifest.

    tandem k8s render configs/h100.yaml --out-dir k8s/base           # the kustomize base
    tandem k8s render configs/h100.yaml --out-dir k8s/base --check   # exit 1 if a file is stale
    tandem k8s render configs/cpu-dev.yaml --serve-config-patch k8s/overlays/cpu-dev/serve-config.yaml
    tandem k8s validate k8s/                                         # files, folders (kustomize), - for stdin
    kustomize build k8s/overlays/h100 | tandem k8s validate -

``validate`` exits 0 with a one-line summary when every document is valid, 1
when any is not (one line per problem), 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.errors import ConfigError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tandem k8s", description="KubeRay manifests: render from a profile, validate")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("render", help="render the RayService (+ Redis, secrets, kustomization) from a profile",
                       description="Render KubeRay manifests from a Serve profile.")
    r.add_argument("config", help="a Serve profile, e.g. configs/h100.yaml")
    r.add_argument("--out-dir", default=None, help="write the kustomize base into this folder (e.g. k8s/base)")
    r.add_argument("--serve-config-patch", default=None, metavar="FILE",
                   help="write only a patch that swaps this profile into the RayService's serveConfigV2 "
                        "(for an overlay, e.g. k8s/overlays/cpu-dev/serve-config.yaml)")
    r.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing; "
                   "exit 1 if one differs")
    r.add_argument("--no-validate", action="store_true", help="skip the strict serveConfigV2 check")
    v = sub.add_parser("validate", help="validate manifests strictly: files, folders (kustomizations are built), "
                       "- for stdin", description="Validate Kubernetes manifests strictly (KubeRay CRDs, "
                       "kubernetes-validate, serveConfigV2 as Ray and Tandem read it, cross-checks).")
    v.add_argument("paths", nargs="+", metavar="PATH", help="a file, a folder, or - for stdin")
    v.add_argument("--crd-dir", type=Path, default=None,
                   help="the KubeRay CRDs (ray.io_*.yaml); default $TANDEM_SHARED_DATA/kuberay-crds")
    v.add_argument("--kubernetes-version", default=None, help="schemas of this version (default: newest known)")
    v.add_argument("-q", "--quiet", action="store_true", help="print only errors, no warnings or summary")
    return p


def _render(ns: argparse.Namespace) -> int:
    from serve.k8s.render import (
        generated_header,
        render_all,
        render_rayservice,
        render_serve_config_patch,
        render_yaml,
    )

    if not ns.no_validate:
        from models.validate import validate_serve_config_v2
        from serve.config import parse_app_config

        validate_serve_config_v2(Path(ns.config).read_text(), app_args_validator=parse_app_config)
    files: dict[Path, str] = {}
    if ns.serve_config_patch:
        files[Path(ns.serve_config_patch)] = render_serve_config_patch(ns.config, out_file=ns.serve_config_patch)
    if ns.out_dir:
        out = Path(ns.out_dir)
        files.update({out / name: text for name, text in render_all(ns.config, out_dir=ns.out_dir).items()})
    if not files:
        if ns.check:
            print("error: --check needs --out-dir or --serve-config-patch", file=sys.stderr)
            return 2
        sys.stdout.write(generated_header(f"tandem k8s render {ns.config}")
                         + render_yaml(render_rayservice(ns.config)))
        return 0
    stale = [path for path, text in files.items() if not path.is_file() or path.read_text() != text]
    if ns.check:
        for path in stale:
            print(f"{path}: differs from the rendered manifest (run without --check to rewrite it)",
                  file=sys.stderr)
        return 1 if stale else 0
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")
    return 0


def _validate(ns: argparse.Namespace) -> int:
    from serve.k8s.validate import validate_paths

    stdin_text = sys.stdin.read() if "-" in ns.paths else None
    report = validate_paths(ns.paths, crd_dir=ns.crd_dir, k8s_version=ns.kubernetes_version,
                            stdin_text=stdin_text)
    for issue in report.issues:
        if issue.severity == "error" or not ns.quiet:
            print(issue.format())
    if not ns.quiet:
        print(report.summary())
    return 1 if report.errors else 0


def main(argv: list[str] | None = None) -> int:
    """``tandem k8s render|validate ...``; exit 2 on a configuration the command cannot use."""
    ns = build_parser().parse_args(argv)
    try:
        return _render(ns) if ns.command == "render" else _validate(ns)
    except ConfigError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror}", file=sys.stderr)
        return 2

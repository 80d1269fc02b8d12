"""gRPC stubs for ``tandem.v1.Assistant``, generated from ``assistant.proto`` by grpcio-tools.

The generated modules are build outputs (ignored by git). :func:`ensure_stubs`
regenerates them when missing or older than the ``.proto``; it runs on import
of this package so every process (the gRPC proxy included) finds them.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["ensure_stubs", "PROTO"]

_HERE = Path(__file__).resolve().parent
PROTO = _HERE / "assistant.proto"
_OUTPUTS = ("assistant_pb2.py", "assistant_pb2_grpc.py")


def _current() -> bool:
    src = PROTO.stat().st_mtime
    return all((_HERE / o).is_file() and (_HERE / o).stat().st_mtime >= src for o in _OUTPUTS)


def ensure_stubs(force: bool = False) -> None:
    """Generate ``assistant_pb2.py`` / ``assistant_pb2_grpc.py`` next to the proto if stale."""
    if not force and _current():
        return
    from grpc_tools import protoc

    root = _HERE.parent.parent  # so generated imports read ``from serve.protos import ...``
    with tempfile.TemporaryDirectory(dir=_HERE) as tmp:
        rc = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{root}",
                f"--python_out={tmp}",
                f"--grpc_python_out={tmp}",
                str(PROTO.relative_to(root)),
            ]
        )
        if rc != 0:
            raise RuntimeError(f"protoc failed ({rc}) on {PROTO}")
        gen = Path(tmp) / "serve" / "protos"
        for name in _OUTPUTS:
            os.replace(gen / name, _HERE / name)  # atomic: concurrent importers never see half a file


ensure_stubs()

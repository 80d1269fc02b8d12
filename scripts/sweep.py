"""Serving-config sweep: one load test per grid point (a thin wrapper over ``serve.sweep``).

    python scripts/sweep.py configs/embedded.yaml --set models.smollm2.engine_kwargs.max_num_seqs=4,16 \\
        --requests 20 --duration 30 --slo-ttft-ms 500
    python scripts/sweep.py --help
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serve.sweep import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

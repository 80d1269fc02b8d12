"""Load test of the Tandem turn API over HTTP/SSE and gRPC (a thin wrapper over ``serve.loadtest``).

    python scripts/loadtest.py --start configs/embedded.yaml --protocol both --requests 40 --slo-ttft-ms 500
    python scripts/loadtest.py --help
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from serve.loadtest import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

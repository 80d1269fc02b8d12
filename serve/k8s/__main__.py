"""``python -m serve.k8s`` is ``tandem k8s``."""

from serve.k8s.cli import main

raise SystemExit(main())

"""``python -m aais_langgraph.cli``."""

from . import main

raise SystemExit(main())

"""es_search's benchmarks: scripts run as ``python benchmarks/NAME.py``; ``harness/`` measures."""

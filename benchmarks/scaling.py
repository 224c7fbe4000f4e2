"""Core-scaling benchmark of es_search's evaluation engine (issue 3).

    python benchmarks/scaling.py [--quick] [--out DIR] [--n-jobs 1,2,4] [--readme README.md]

The same as ``es-search bench``; the code lives in ``es_search/bench.py`` so that it
works from an installed package too.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from es_search.bench import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())

"""``python -m es_search.bench``: the same as ``es-search bench``."""
import sys

from .command import main

sys.exit(main())

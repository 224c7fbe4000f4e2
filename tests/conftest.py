import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import cloudpickle  # noqa: E402

import agents  # noqa: E402

# Worker processes (loky, dask) need not import the tests folder: send these by value.
cloudpickle.register_pickle_by_value(agents)

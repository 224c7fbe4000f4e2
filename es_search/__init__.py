"""es_search: evolution-strategies hill climbing of PyTorch agents on all cores.

Subclass :class:`Agent`, write ``score()``, call :func:`run`.
"""
from .interrupt import guard_command_start as _guard_command_start

_guard_command_start()  # the es-search command: a Ctrl-C while torch loads is one line

from .agent import Agent
from .batch_check import ScoreBatchMismatch, check_score_batch
from .candidates import Candidate
from .checkpoint import CheckpointError, ResumeWarning
from .errors import ScoreError, SettingError, WorkerError
from .evaluation import Evaluator, evaluate
from .interrupt import Terminated
from .output import OutFolderError
from .pickling import UnpicklableAgentError
from .repeat_check import UnrepeatableScoreWarning, check_repeatable
from .replay import replay_task
from .result import Result
from .run import run
from .seeding import task_seed
from .strategies import STRATEGIES, Strategy, make_strategy

__version__ = "0.1.0"

#: subpackages loaded on first use, so that ``es_search.problems.Function`` works after a
#: bare ``import es_search`` (which stays light: no gymnasium, no callbacks' extras)
_SUBMODULES = ("batched", "callbacks", "problems", "strategies")


def __getattr__(name: str):
    if name in _SUBMODULES:
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'es_search' has no attribute {name!r}")

__all__ = ["Agent", "Candidate", "CheckpointError", "Evaluator", "OutFolderError", "Result", "ResumeWarning",
           "STRATEGIES", "ScoreBatchMismatch", "ScoreError", "SettingError", "Strategy", "Terminated",
           "UnpicklableAgentError", "UnrepeatableScoreWarning", "WorkerError",
           "__version__",
           "check_repeatable", "check_score_batch", "evaluate", "make_strategy", "replay_task",
           "run",
           "task_seed"]

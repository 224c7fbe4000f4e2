"""es_search: evolution-strategies hill climbing of PyTorch agents on all cores.

Subclass :class:`Agent`, write ``score()``, call :func:`run`.
"""
from .agent import Agent
from .candidates import Candidate
from .evaluation import Evaluator, ScoreError, evaluate
from .result import Result
from .run import run
from .seeding import task_seed
from .strategies import STRATEGIES, Strategy, make_strategy

__version__ = "0.1.0"

__all__ = ["Agent", "Candidate", "Evaluator", "Result", "STRATEGIES", "ScoreError",
           "Strategy", "__version__", "evaluate", "make_strategy", "run", "task_seed"]

"""es_search: evolution-strategies hill climbing of PyTorch agents on all cores.

Subclass :class:`Agent`, write ``score()``, call :func:`run`. Each public name is
imported on first use, so ``es-search`` starts before torch is imported.
"""
from importlib import import_module

__version__ = "0.1.0"

_LAZY = {"Agent": "agent", "ScoreBatchMismatch": "score_checks",
         "check_score_batch": "score_checks", "Candidate": "candidates",
         "CheckpointError": "checkpoint", "ResumeWarning": "checkpoint", "ScoreError": "errors",
         "SettingError": "errors", "WorkerError": "errors", "Evaluator": "front",
         "evaluate": "front", "Terminated": "interrupt", "OutFolderError": "lock",
         "UnpicklableAgentError": "pickling", "UnrepeatableScoreWarning": "score_checks",
         "check_repeatable": "score_checks", "replay_task": "replay", "Result": "result",
         "run": "loop", "RunSpec": "spec", "load_run": "spec", "task_seed": "seeding",
         "STRATEGIES": "strategies", "Strategy": "strategies", "make_strategy": "strategies"}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
    else:  # a subpackage or module: es_search.problems.Function after `import es_search`
        try:
            value = import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


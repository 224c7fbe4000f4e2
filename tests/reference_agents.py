"""Agents that the workers import by reference (this module is never registered with
``cloudpickle.register_pickle_by_value``): a worker gets their classes as this file
defines them, not as a test changed them in the main process."""
import torch

import es_search


class GroupSizedByClass(es_search.Agent):
    """Each row's score depends (slightly) on the size of its group, which the class
    sets: a worker that cut other groups than the main process would give other scores."""

    score_batch_size = 4

    def __init__(self, dim=3):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(dim), requires_grad=False)

    def score(self):
        return -float(((self.w.double() - 1) ** 2).sum())

    def score_batch(self, params, seeds):
        w = params["w"].double()
        return -((w - 1) ** 2).sum(dim=1) + 1e-3 * len(seeds)

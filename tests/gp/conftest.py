"""One torch thread for the GP tests: their matrices are tiny, and on a shared CPU the OpenMP workers of a
multi-threaded torch spin and cost 10-100x more CPU time than the work itself (the runner does the same)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)

"""`laptime.distributed.configure_from_env()` under a launcher that sets no RANK variable
(`torch.multiprocessing.spawn`): the rank comes from the initialised process group, so that each
rank reports as itself and `LAPTIME_OUTPUT=rank{rank}.json` names one file per rank. The process
group is a stand-in with the two calls laptime makes (the real one needs torch: the studies tier's
torchrun tests run it)."""

import json

import laptime
from laptime import distributed


class ProcessGroup:
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def get_rank(self):
        return self.rank

    def get_world_size(self):
        return self.world_size


def test_the_rank_of_an_initialised_process_group_is_the_report_s(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LAPTIME_RANKS", "all")
    monkeypatch.setattr(distributed, "_dist", lambda: ProcessGroup(2, 3))
    distributed.configure_from_env()
    results = json.loads(laptime.Stopwatch().to_json())
    assert (results["rank"], results["world_size"]) == (2, 3)
    laptime.Stopwatch().set_rank(0, 1)


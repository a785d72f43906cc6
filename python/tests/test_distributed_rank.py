"""`laptime.distributed.configure_from_env()` under a launcher that sets no RANK variable
(`torch.multiprocessing.spawn`): the rank comes from the initialised process group, so that each
rank reports as itself and `LAPTIME_OUTPUT=rank{rank}.json` names one file per rank. The process
group is a stand-in with the two calls laptime makes (the real one needs torch: the studies tier's
torchrun tests run it)."""

import io
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



class SubgroupWorld(ProcessGroup):
    """A world of 3 where this process is rank 1, the first of a subgroup of ranks 1 and 2."""

    def get_rank(self, group=None):
        return self.rank if group is None else 0

    def get_world_size(self, group=None):
        return self.world_size if group is None else 2

    def all_gather_object(self, everyone, mine, group=None):
        other = json.loads(mine)
        other.update(rank=2, pid=other["pid"] + 1)
        everyone[:] = [mine, json.dumps(other)]


def test_a_subgroups_report_names_each_rank_by_its_own_rank(stopwatch, monkeypatch):
    stopwatch.enable(0)
    stopwatch.start_meas("step")
    stopwatch.end_meas("step")
    stopwatch.finish_iter()
    monkeypatch.setattr(distributed, "_dist", lambda: SubgroupWorld(1, 3))
    buf = io.StringIO()
    merged = distributed.report(file=buf, group=object())  # printed on the group's first rank
    text = buf.getvalue()
    assert "rank 1: " in text and "rank 2: " in text and "rank 0" not in text, text
    assert [r["rank"] for r in merged["ranks"]] == [1, 2]
    # Without a process group a process reports only itself, as the rank it is: rank 1 of 2
    # prints nothing, as every rank but 0 does.
    monkeypatch.setattr(distributed, "_dist", lambda: None)
    stopwatch.set_rank(1, 2)
    buf = io.StringIO()
    assert distributed.report(file=buf) is None and buf.getvalue() == ""
    stopwatch.set_rank(0, 1)

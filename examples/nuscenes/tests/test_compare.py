"""``laptime compare`` reproduces seed 000's data-loading table from the seed's own numbers:
416 ms / 3.2 % (PyTorch DataLoader) vs 181 ms / 1.3 % (DALI) -> x 2.30 faster, 59 % CPU saved."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(HERE, "fixtures", "seed000_reference.json")
DALI = os.path.join(HERE, "fixtures", "seed000_dali.json")

SEED_TABLE = """\
Method                         | Average runtime [ms/batch] | Average CPU usage [%]
Reference (PyTorch DataLoader) | 416                        | 3.2
DALI Pipeline Framework        | 181                        | 1.3
Speedup × 2.30 (DALI Pipeline Framework vs Reference (PyTorch DataLoader))
Savings 59 % (DALI Pipeline Framework vs Reference (PyTorch DataLoader))"""


def test_compare_reproduces_the_seed_table():
    from laptime import compare

    rows = compare.rows([REF, DALI], labels=["Reference (PyTorch DataLoader)",
                                             "DALI Pipeline Framework"])
    assert compare.table(rows) == SEED_TABLE


def test_laptime_compare_command_prints_it():
    done = subprocess.run([sys.executable, "-m", "laptime", "compare", REF, DALI, "--labels",
                           "Reference (PyTorch DataLoader),DALI Pipeline Framework"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == SEED_TABLE


def test_compare_names_the_measurements_when_the_loop_is_missing(tmp_path):
    from laptime import compare

    with pytest.raises(ValueError, match="no measurement 'training loop'.*'data loading loop'"):
        compare.rows([REF], name="training loop")


def test_the_loader_table_gives_both_cpu_figures_and_leads_with_the_statistic_asked():
    """docs/studies/loader_table.py on the committed CPU-only runs (docs/reports/loader-study):
    CPU as % of the machine and as core-ms per batch (cores x mean), the median first with
    --by median, the mean first by default."""
    import json

    root = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
    runs = os.path.join(root, "docs", "reports", "loader-study")
    tool = os.path.join(root, "docs", "studies", "loader_table.py")
    if not os.path.exists(os.path.join(runs, "reference-w2.json")):
        pytest.skip("docs/reports/loader-study is not in this tree")
    specs = [f"ref={runs}/reference-w2.json", f"dali={runs}/dali-w1.json"]
    with open(os.path.join(runs, "dali-w1.json"), encoding="utf-8") as f:
        loop = next(m for m in json.load(f)["measurements"] if m["name"] == "data loading loop")
    mean_ms = 1e3 * loop["total_s"] / loop["count"]
    core_ms = loop["cpu"]["process_cores"] * mean_ms
    by_median = subprocess.run([sys.executable, tool, "--by", "median", *specs],
                               capture_output=True, text=True, check=True).stdout.splitlines()
    assert by_median[0].startswith("| run | batches | median [ms/batch] | mean [ms/batch] |")
    assert by_median[0].endswith("| CPU [% of machine] (cores) | CPU time [core-ms/batch] |")
    dali = by_median[3].split("|")
    assert float(dali[3]) == pytest.approx(1e3 * loop["median_s"], abs=0.05)
    assert float(dali[4]) == pytest.approx(mean_ms, abs=0.05)
    assert dali[6].split()[0] == f"{loop['cpu']['process_percent']:.1f}"
    assert float(dali[7]) == pytest.approx(core_ms, abs=0.05)
    assert "| speedup, medians | speedup, means |" in by_median[5]
    by_mean = subprocess.run([sys.executable, tool, *specs], capture_output=True, text=True,
                             check=True).stdout
    assert "| mean [ms/batch] | median [ms/batch] |" in by_mean

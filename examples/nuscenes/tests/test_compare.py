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

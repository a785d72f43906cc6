"""How many of pytest's GPU cases ran and how many were skipped, from its JUnit XML record.

Used by scripts/gpu-check.sh. The GPU cases are those of test_gpu.py; they are counted from
pytest's own record of each case, not from its messages (another test's skip reason may mention
the GPU). A case that failed or broke counts as neither ran nor skipped. Prints "RAN SKIPPED".

    python3 scripts/gpu-check/gpu_cases.py pytest.xml
"""

import sys
import xml.etree.ElementTree as ET


def gpu_cases(path):
    """(ran, skipped) over the test cases of test_gpu.py in the JUnit XML file PATH."""
    ran = skipped = 0
    for case in ET.parse(path).iter("testcase"):
        if "test_gpu" not in case.get("classname", ""):
            continue
        if case.find("skipped") is not None:
            skipped += 1
        elif case.find("failure") is None and case.find("error") is None:
            ran += 1
    return ran, skipped


if __name__ == "__main__":
    print(*gpu_cases(sys.argv[1]))

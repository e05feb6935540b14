#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The slowest tests of a ctest run, from its JUnit XML files.

    python3 scripts/slowest_tests.py build/test-results [--top 10]

The folder holds ctest.xml (ctest --output-junit: one row per ctest entry) and <entry>.xml (GoogleTest's
GTEST_OUTPUT of each entry: one row per case), as tests/CMakeLists.txt and scripts/setup.sh write them. Prints the
entries by time, then the slowest cases over every entry, each with its entry; a case that runs in several entries
(test_kernels under kernels_isa_avx2 and the BLIS configurations) counts once per entry.
"""
import argparse
import pathlib
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(seconds, suite.case, status) of each <testcase> of a JUnit file."""
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        suite = case.get("classname", "")
        status = case.get("status", "")
        if case.find("failure") is not None:
            status = "failed"
        elif case.find("skipped") is not None or case.get("result") == "skipped":
            status = "skipped"
        # ctest's rows repeat the entry's name as their class name.
        full = name if suite in ("", name) else f"{suite}.{name}"
        yield float(case.get("time", "0") or 0), full, status


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=pathlib.Path)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args()
    ctest = args.folder / "ctest.xml"
    if not ctest.is_file():
        print(f"slowest_tests.py: {ctest}: no such file, expected ctest --output-junit's", file=sys.stderr)
        return 2
    entries = sorted(cases(ctest), reverse=True)
    print(f"ctest entries by time ({sum(t for t, _, _ in entries):.1f} s in all):")
    for seconds, name, status in entries:
        print(f"  {seconds:8.1f} s  {name}{'' if status in ('run', 'passed', '') else '  (' + status + ')'}")
    gtest = []
    for path in sorted(args.folder.glob("*.xml")):
        if path.name == "ctest.xml":
            continue
        gtest.extend((seconds, name, path.stem) for seconds, name, _ in cases(path))
    gtest.sort(reverse=True)
    print(f"The {min(args.top, len(gtest))} slowest of {len(gtest)} GoogleTest cases:")
    for seconds, name, entry in gtest[: args.top]:
        print(f"  {seconds:8.1f} s  {name}  [{entry}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

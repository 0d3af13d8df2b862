#!/usr/bin/env python3
"""Writes the committed sample of the public kernel measurements (shared/data/kernels) that
tests/validate/kernels/ holds: for each operator, every GPU's shortest row (the measuring loop's
floor, which predictions need) and ROWS rows evenly spread over the file, with the columns
epochcast kernels reads. Deterministic: the same data give the same files.

    tools/kernel_sample.py ../shared/data/kernels tests/validate/kernels [ROWS]
"""
import csv
import gzip
import pathlib
import sys

KEEP = ["OPName", "Latency", "Device"]
SHAPES = {
    "linear": ["B", "M", "N", "K"],
    "bmm": ["B", "M", "N", "K"],
    "conv": ["B", "Input_Channel", "Output_Channel", "Kernel_Szie", "Input_Size", "Stride",
             "Padding"],
}


def main():
    source, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    per_file = int(sys.argv[3]) if len(sys.argv) > 3 else 120
    target.mkdir(parents=True, exist_ok=True)
    for folder in sorted(p for p in source.iterdir() if p.is_dir() and p.name != "device_configs"):
        op = folder.name
        # The library kernel that ran says which tile or algorithm the library chose: kept for
        # the matrix products and convolutions, whose choice the model makes too.
        columns = KEEP + (["Kernel Name"] if op in SHAPES else []) + SHAPES.get(op, ["B", "H"])
        out_rows = []
        for file in sorted(folder.glob("*.csv.gz")):
            with gzip.open(file, "rt", newline="") as f:
                rows = list(csv.DictReader(f))
            shortest = min(range(len(rows)), key=lambda i: float(rows[i]["Latency"]))
            stride = max(1, len(rows) // per_file)
            picked = sorted({shortest, *range(0, len(rows), stride)})
            out_rows += [[rows[i][c] for c in columns] for i in picked]
        with open(target / f"{op}.csv", "w", newline="") as f:
            f.write(f"# About {per_file} rows of each GPU's file in shared/data/kernels/{op}, with "
                    "its shortest; written by tools/kernel_sample.py\n")
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(out_rows)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""DuckDB's side of ckport's floor benchmark (scripts/bench.sh runs it with duckdb from PyPI).

  bench_duckdb.py load IN.jsonl OUT.duckdb THREADS   CREATE TABLE … AS read_json(IN): every
                                                    value typed, into a DuckDB file
  bench_duckdb.py export IN.duckdb OUT.json THREADS  COPY the table to JSON Lines
"""
import os
import sys

import duckdb


def main(kind, source, target, threads):
    if kind == "load":
        if os.path.exists(target):
            os.remove(target)
        db = duckdb.connect(target)
        db.execute(f"SET threads = {int(threads)}")
        db.execute("CREATE TABLE records AS SELECT * FROM read_json(?, format = 'newline_delimited', maximum_object_size = 16777216)", [source])
        db.execute("CHECKPOINT")
        db.close()
    elif kind == "export":
        db = duckdb.connect(source, read_only=True)
        db.execute(f"SET threads = {int(threads)}")
        db.execute(f"COPY records TO '{target}' (FORMAT json)")
        db.close()
        fd = os.open(target, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(*sys.argv[1:5])

"""What the join's Python scripts share: the column cache's format, DuckDB and its tpch extension.

The cache holds one file per column under <cache-dir>/sf<N>/ (apps/join/include/join/column_file.h
reads it). A file is a 64-byte header and the values:

    0  magic     8 bytes  b"TSRJCOL1"
    8  version   u32      1
   12  type      u32      1 = int64 (keys; prices in cents)
   16  rows      u64
   24  checksum  u64      sum over i of value[i] * (2i + 1), modulo 2^64
   32  reserved  32 zero bytes
   64  values    rows * 8 bytes, little endian
"""
import glob
import os
import struct

import duckdb
import numpy as np

MAGIC = b"TSRJCOL1"
VERSION = 1
TYPE_INT64 = 1
HEADER_BYTES = 64

# (table, column, SQL expression): the columns the two joins read; prices as integer cents.
COLUMNS = [
    ("customer", "c_custkey", "c_custkey"),
    ("orders", "o_orderkey", "o_orderkey"),
    ("orders", "o_custkey", "o_custkey"),
    ("orders", "o_totalprice", "CAST(o_totalprice * 100 AS BIGINT)"),
    ("lineitem", "l_orderkey", "l_orderkey"),
    ("lineitem", "l_extendedprice", "CAST(l_extendedprice * 100 AS BIGINT)"),
]




def scale_dir_name(scale_factor):
    """sf1, sf10, sf0.01: the same spelling as join::cache_directory() in C++."""
    text = ("%.6f" % scale_factor).rstrip("0").rstrip(".")
    return "sf" + text


def tpch_extension_path():
    """The tpch extension file the duckdb-extension-tpch wheel installed, for this duckdb."""
    import duckdb_extension_tpch  # noqa: F401  (installed beside duckdb by requirements.txt)
    base = os.path.dirname(duckdb_extension_tpch.__file__)
    wanted = os.path.join(base, "extensions", "v" + duckdb.__version__, "tpch.duckdb_extension")
    if os.path.exists(wanted):
        return wanted
    found = sorted(glob.glob(os.path.join(base, "extensions", "*", "tpch.duckdb_extension")))
    if not found:
        raise SystemExit("tpch extension not found under %s (is duckdb-extension-tpch installed?)"
                         % base)
    raise SystemExit("tpch extension %s does not match duckdb %s" % (found[0], duckdb.__version__))


def connect(path=":memory:"):
    con = duckdb.connect(path)
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("LOAD '%s'" % tpch_extension_path().replace("'", "''"))
    return con


def checksum(values):
    """sum(value[i] * (2i + 1)) mod 2^64, as column_file.h computes it."""
    v = values.view(np.uint64)
    weights = np.arange(len(v), dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int(np.sum(v * weights, dtype=np.uint64))


def write_column(path, values):
    values = np.ascontiguousarray(values, dtype="<i8")
    header = struct.pack("<8sIIQQ", MAGIC, VERSION, TYPE_INT64, len(values), checksum(values))
    header += b"\0" * (HEADER_BYTES - len(header))
    with open(path, "wb") as f:
        f.write(header)
        values.tofile(f)


def read_column(path):
    with open(path, "rb") as f:
        header = f.read(HEADER_BYTES)
        magic, version, kind, rows, _ = struct.unpack_from("<8sIIQQ", header)
        if magic != MAGIC or version != VERSION or kind != TYPE_INT64:
            raise SystemExit("%s: not a tessera join column file (version 1, int64)" % path)
    values = np.fromfile(path, dtype="<i8", offset=HEADER_BYTES)
    if len(values) != rows:
        raise SystemExit("%s: %d rows in the header, %d in the file" % (path, rows, len(values)))
    return values


def column_file(directory, table, column):
    return os.path.join(directory, "%s.%s.col" % (table, column))

#!/usr/bin/env python3
"""Prints ggml's f16 GELU table (`ggml_table_gelu_f16`) as llama.cpp's CPU build fills it.

Usage: ggml-gelu-table.py
ggml's CPU code computes GELU (Gemma's MLP activation) by looking the input, rounded to f16, up in a table of
65536 f16 values that `ggml_cpu_init` fills. This script reads that table out of the shared library of PyPI's
`xllamacpp` (which exports it) through ctypes, and prints it as one line of little-endian u16 values in hex.
nmb-local's tests compare it with the table the engine builds. `scripts/assets.sh` installs the pinned
xllamacpp into .nmb-assets/py; put that folder on PYTHONPATH.
"""
import ctypes as C
import os
import sys

import xllamacpp


def main():
    folder = os.path.dirname(xllamacpp.__file__)
    names = [n for n in os.listdir(folder) if n.startswith("xllamacpp") and ".so" in n]
    if not names:
        sys.exit(f"ggml-gelu-table.py: no xllamacpp shared library in {folder}")
    lib = C.CDLL(os.path.join(folder, names[0]))
    lib.ggml_cpu_init()
    table = (C.c_uint16 * 65536).in_dll(lib, "ggml_table_gelu_f16")
    if not any(table):
        sys.exit("ggml-gelu-table.py: the table is still empty after ggml_cpu_init")
    print(bytes(table).hex())


if __name__ == "__main__":
    main()

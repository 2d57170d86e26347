#!/usr/bin/env python3
"""nmb's volume rendering against pydicom + numpy and nibabel doing the same work on the same files.

Workloads (as in benches/volumes.rs):
  nifti_montage  load a 256x256x180 NIfTI, reorient to RAS, window (1st-99th percentile), cut 9 axial slices,
                 lay them out 3x3 and encode one 8-bit PNG;
  dicom_series   read a 200-file DICOM series, order it by position, rescale, window, take the middle slice
                 and encode it as PNG.

Usage (from the repository root; scripts/assets.sh installs pydicom, nibabel and packaging):
    PYTHONPATH=.nmb-assets/py python3 crates/imaging/benches/compare_python.py [--repeat 5]
Prints one JSON object per workload and tool, then a summary with each speed-up (Python time / nmb time).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
import struct

import numpy as np
import nibabel as nib
import pydicom
from pydicom.dataset import FileDataset, FileMetaDataset
from pydicom.uid import ExplicitVRLittleEndian, generate_uid, CTImageStorage

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))


def phantom(nx=256, ny=256, nz=180):
    i, j, k = np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij")
    x, y, z = i - 128.0, j - 128.0, k - 90.0
    r = np.sqrt(x * x / 90.0**2 + y * y / 110.0**2 + z * z / 80.0**2)
    v = np.zeros(r.shape, dtype=np.int16)
    v[r < 1.0] = 1400
    v[r < 0.95] = (800 + 50 * ((i * 7 + j * 13 + k * 3) % 11))[r < 0.95]
    v[r < 0.25] = 200
    return v


def write_nifti(path, vol):
    img = nib.Nifti1Image(vol, np.diag([1.0, 1.0, 1.0, 1.0]) + np.array(
        [[0, 0, 0, -128], [0, 0, 0, -128], [0, 0, 0, -90], [0, 0, 0, 0]]))
    nib.save(img, path)


def write_series(directory, vol):
    os.makedirs(directory, exist_ok=True)
    series_uid, study_uid = generate_uid(), generate_uid()
    for k in range(vol.shape[2]):
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = CTImageStorage
        meta.MediaStorageSOPInstanceUID = generate_uid()
        meta.TransferSyntaxUID = ExplicitVRLittleEndian
        ds = FileDataset(None, {}, file_meta=meta, preamble=b"\0" * 128)
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, meta.MediaStorageSOPInstanceUID
        ds.Modality, ds.SeriesInstanceUID, ds.StudyInstanceUID = "CT", series_uid, study_uid
        ds.InstanceNumber = k + 1
        ds.ImagePositionPatient = [-128.0, -128.0, float(k)]
        ds.ImageOrientationPatient = [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing, ds.SliceThickness = [1.0, 1.0], 1.0
        ds.Rows, ds.Columns = vol.shape[1], vol.shape[0]
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleSlope, ds.RescaleIntercept = 1, -1024
        ds.PixelData = np.ascontiguousarray(vol[:, :, k].T).astype(np.int16).tobytes()
        # Shuffled names, so ordering by position is real work.
        ds.save_as(os.path.join(directory, "f%05d.dcm" % ((k * 7919) % 100000)), enforce_file_format=True)


def png(gray):
    h, w = gray.shape
    raw = b"".join(b"\0" + gray[r].tobytes() for r in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 1)) + chunk(b"IEND", b""))


def window(values, lo, hi):
    return np.round(np.clip((values - lo) / (hi - lo), 0, 1) * 255).astype(np.uint8)


def auto_range(vol):
    stride = max(vol.size // 200_000, 1)
    lo, hi = np.percentile(vol.ravel(order="F")[::stride], [1, 99])
    return lo, hi


def python_nifti_montage(path):
    img = nib.as_closest_canonical(nib.load(path))
    vol = img.get_fdata(dtype=np.float32)
    lo, hi = auto_range(vol)
    nz = vol.shape[2]
    slices = [(t + 1) * nz // 10 for t in range(9)]
    cells = [window(np.flipud(np.fliplr(vol[:, :, k].T)), lo, hi) for k in slices]
    rows = [np.hstack(cells[r * 3:(r + 1) * 3]) for r in range(3)]
    return png(np.vstack(rows))


def python_dicom_series(directory):
    datasets = [pydicom.dcmread(os.path.join(directory, f)) for f in os.listdir(directory)]
    datasets.sort(key=lambda d: float(d.ImagePositionPatient[2]))
    vol = np.stack([d.pixel_array.astype(np.float32) * float(d.RescaleSlope) + float(d.RescaleIntercept)
                    for d in datasets], axis=-1)
    lo, hi = auto_range(vol)
    return png(window(vol[:, :, vol.shape[2] // 2], lo, hi))


def timed(fn, arg, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(arg)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return {"median_ms": times[len(times) // 2], "min_ms": times[0], "png_bytes": len(out)}


def main():
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 5
    with tempfile.TemporaryDirectory() as tmp:
        vol = phantom()
        nifti, series = os.path.join(tmp, "phantom.nii"), os.path.join(tmp, "series")
        write_nifti(nifti, vol)
        write_series(series, vol[:, :, :200] if vol.shape[2] >= 200 else np.concatenate([vol, vol[:, :, :20]], 2))
        cmd = ["cargo", "bench", "-q", "-p", "nmb-imaging", "--bench", "volumes", "--",
               "--nifti", nifti, "--series", series, "--repeat", str(repeat)]
        out = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True).stdout
        rust = {r["workload"]: r for r in map(json.loads, filter(None, out.splitlines()))}
        py = {"nifti_montage": timed(python_nifti_montage, nifti, repeat),
              "dicom_series": timed(python_dicom_series, series, repeat)}
    for workload, r in rust.items():
        print(json.dumps(r))
        print(json.dumps({"workload": workload, "tool": "python (nibabel / pydicom + numpy)", **py[workload]}))
    summary = {w: round(py[w]["median_ms"] / rust[w]["median_ms"], 2) for w in rust}
    print(json.dumps({"speedup": summary, "target": 3.0, "met": all(s >= 3.0 for s in summary.values())}))


if __name__ == "__main__":
    main()

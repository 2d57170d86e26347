//! NIfTI-1 volumes (`.nii`, `.nii.gz`) into a [`Volume`]: scaling by scl_slope/scl_inter, orientation from the
//! sform (else the qform, else the voxel sizes alone), and one 3-D volume out of a 4-D file.

use std::io::Read;
use std::path::Path;

use nifti::NiftiHeader;

use crate::meta::{axis_codes, plane_of_normal, VolumeMeta};
use crate::volume::{FileBytes, RawVoxels, Scalar, Volume, Voxels};
use crate::{ImageFormat, VolumeError};

/// Loads volume `index` (0 for a 3-D file) of a NIfTI file, gzipped or not (told apart by its bytes).
pub fn load(path: &Path, index: Option<usize>) -> Result<(Volume, VolumeMeta), VolumeError> {
    let bytes = read(path)?;
    let err = |message: String| VolumeError::Nifti {
        path: path.to_path_buf(),
        message,
    };
    if bytes.len() >= 8 && (&bytes[4..8] == b"n+2\0" || &bytes[4..8] == b"ni2\0") {
        return Err(err(
            "NIfTI-2 files are not supported; expected NIfTI-1 (.nii or .nii.gz)".into(),
        ));
    }
    let header = NiftiHeader::from_reader(std::io::Cursor::new(&bytes[..]))
        .map_err(|e| err(format!("cannot parse the header: {e}")))?;
    let dims = spatial_dims(&header).map_err(&err)?;
    let volumes = if header.dim[0] >= 4 {
        header.dim[4].max(1) as usize
    } else {
        1
    };
    let index = index.unwrap_or(0);
    if index >= volumes {
        return Err(err(format!(
            "volume {index} asked for, but the file has {volumes} (expected 0..{volumes})"
        )));
    }
    let scalar = scalar_of(header.datatype).map_err(&err)?;
    let n = dims.iter().product::<usize>();
    let vox_offset = header.vox_offset.max(352.0) as usize;
    let volume_bytes = n.checked_mul(scalar.size());
    let sizes = volume_bytes.and_then(|v| Some((v.checked_mul(index)?, v.checked_mul(volumes)?)));
    let Some((before, all)) = sizes.and_then(|(b, a)| Some((b, a.checked_add(vox_offset)?))) else {
        return Err(err(format!(
            "the header describes {volumes} volume(s) of {}x{}x{} voxels, more than can be addressed",
            dims[0], dims[1], dims[2]
        )));
    };
    let start = vox_offset + before;
    let needed = all;
    if bytes.len() < needed {
        return Err(err(format!(
            "the file holds {} bytes, but its header describes {needed} ({volumes} volume(s) of {}x{}x{} {:?} \
             voxels after {vox_offset} header bytes); expected a complete file",
            bytes.len(),
            dims[0],
            dims[1],
            dims[2],
            scalar
        )));
    }
    let affine = affine(&header, dims).map_err(&err)?;
    let spacing = spacing_of(&affine);
    let meta = header_meta(&header, dims, &affine, index);
    let voxels = Voxels::Raw(RawVoxels {
        bytes,
        start,
        scalar,
        big_endian: header.endianness == nifti::Endianness::Big,
        slope: if header.scl_slope.is_finite() {
            header.scl_slope
        } else {
            0.0
        },
        inter: if header.scl_inter.is_finite() {
            header.scl_inter
        } else {
            0.0
        },
    });
    Ok((Volume::over(dims, spacing, affine, voxels), meta))
}

fn scalar_of(datatype: i16) -> Result<Scalar, String> {
    Ok(match datatype {
        2 => Scalar::U8,
        4 => Scalar::I16,
        8 => Scalar::I32,
        16 => Scalar::F32,
        64 => Scalar::F64,
        256 => Scalar::I8,
        512 => Scalar::U16,
        768 => Scalar::U32,
        1024 => Scalar::I64,
        1280 => Scalar::U64,
        other => {
            return Err(format!(
                "datatype {other} is not supported; expected a scalar type (integers, float32 or float64), \
                 not complex or RGB"
            ))
        }
    })
}

/// What the header says, without reading the voxels.
pub fn describe(path: &Path) -> Result<VolumeMeta, VolumeError> {
    let err = |message: String| VolumeError::Nifti {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|source| VolumeError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut head = Vec::with_capacity(348);
    let mut gz_magic = [0u8; 2];
    let is_gz = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut gz_magic))
        .is_ok()
        && gz_magic == [0x1f, 0x8b];
    let read = if is_gz {
        flate2::read::MultiGzDecoder::new(file)
            .take(348)
            .read_to_end(&mut head)
    } else {
        file.take(348).read_to_end(&mut head)
    };
    read.map_err(|e| err(format!("cannot read the header: {e}")))?;
    let header = NiftiHeader::from_reader(std::io::Cursor::new(&head))
        .map_err(|e| err(format!("cannot parse the header: {e}")))?;
    let dims = spatial_dims(&header).map_err(&err)?;
    let affine = affine(&header, dims).map_err(&err)?;
    Ok(header_meta(&header, dims, &affine, 0))
}

fn header_meta(
    header: &NiftiHeader,
    dims: [usize; 3],
    affine: &[[f64; 4]; 3],
    index: usize,
) -> VolumeMeta {
    let spacing = spacing_of(affine);
    let mut meta = VolumeMeta::new(ImageFormat::Nifti);
    meta.source_dims = dims;
    meta.orientation = axis_codes(affine);
    meta.pixel_spacing = Some([spacing[1], spacing[0]]);
    meta.slice_spacing = Some(spacing[2]);
    meta.frames = dims[2];
    meta.volumes = if header.dim[0] >= 4 {
        header.dim[4].max(1) as usize
    } else {
        1
    };
    meta.volume_index = index;
    meta.plane = plane_of_normal([affine[0][2], affine[1][2], affine[2][2]]);
    meta
}

fn spacing_of(affine: &[[f64; 4]; 3]) -> [f64; 3] {
    std::array::from_fn(|a| {
        let len = (0..3).map(|r| affine[r][a].powi(2)).sum::<f64>().sqrt();
        if len > 0.0 {
            len
        } else {
            1.0
        }
    })
}

fn read(path: &Path) -> Result<FileBytes, VolumeError> {
    let read_err = |source| VolumeError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_err)?;
    let mut magic = [0u8; 2];
    let gz = file.read_exact(&mut magic).is_ok() && magic == [0x1f, 0x8b];
    if !gz {
        // SAFETY: the map is only read. Like ripgrep, nmb accepts that a file truncated by another process while
        // it is being read can stop the process; the length was checked against the header when opened.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(read_err)?;
        return Ok(FileBytes::Mapped(map));
    }
    let mut raw = Vec::new();
    std::io::Seek::rewind(&mut file).map_err(read_err)?;
    file.read_to_end(&mut raw).map_err(read_err)?;
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .map_err(|e| VolumeError::Nifti {
            path: path.to_path_buf(),
            message: format!("cannot decompress the gzip stream: {e}"),
        })?;
    Ok(FileBytes::Owned(out))
}

fn spatial_dims(h: &NiftiHeader) -> Result<[usize; 3], String> {
    let rank = h.dim[0] as usize;
    if !(2..=7).contains(&rank) {
        return Err(format!("dim[0] is {rank}; expected 2 to 7 dimensions"));
    }
    if rank > 4 && h.dim[5..=rank].iter().any(|&d| d > 1) {
        return Err(format!(
            "{rank}-D data with extra dimensions {:?}; expected a 3-D or 4-D volume",
            &h.dim[5..=rank]
        ));
    }
    let d = |i: usize| {
        if i <= rank {
            h.dim[i].max(1) as usize
        } else {
            1
        }
    };
    Ok([d(1), d(2), d(3)])
}

/// The voxel-to-RAS affine: sform when set, else qform, else the voxel sizes alone (as nibabel does).
fn affine(h: &NiftiHeader, dims: [usize; 3]) -> Result<[[f64; 4]; 3], String> {
    if h.sform_code > 0 {
        let rows = [h.srow_x, h.srow_y, h.srow_z].map(|r| r.map(f64::from));
        if rows.iter().flatten().all(|v| v.is_finite()) && det3(&rows) != 0.0 {
            return Ok(rows);
        }
    }
    let pix = |i: usize| -> f64 {
        let v = f64::from(h.pixdim[i]).abs();
        if v > 0.0 && v.is_finite() {
            v
        } else {
            1.0
        }
    };
    if h.qform_code > 0 {
        return Ok(qform(h, [pix(1), pix(2), pix(3)]));
    }
    // No orientation at all: nibabel's fallback, x flipped (radiological storage) and centred.
    let s = [pix(1), pix(2), pix(3)];
    Ok([
        [-s[0], 0.0, 0.0, (dims[0] as f64 - 1.0) / 2.0 * s[0]],
        [0.0, s[1], 0.0, -(dims[1] as f64 - 1.0) / 2.0 * s[1]],
        [0.0, 0.0, s[2], -(dims[2] as f64 - 1.0) / 2.0 * s[2]],
    ])
}

fn qform(h: &NiftiHeader, s: [f64; 3]) -> [[f64; 4]; 3] {
    let (b, c, d) = (
        f64::from(h.quatern_b),
        f64::from(h.quatern_c),
        f64::from(h.quatern_d),
    );
    let a = (1.0 - (b * b + c * c + d * d)).max(0.0).sqrt();
    let r = [
        [
            a * a + b * b - c * c - d * d,
            2.0 * (b * c - a * d),
            2.0 * (b * d + a * c),
        ],
        [
            2.0 * (b * c + a * d),
            a * a + c * c - b * b - d * d,
            2.0 * (c * d - a * b),
        ],
        [
            2.0 * (b * d - a * c),
            2.0 * (c * d + a * b),
            a * a + d * d - b * b - c * c,
        ],
    ];
    let qfac = if h.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
    let scale = [s[0], s[1], s[2] * qfac];
    let offset = [h.quatern_x, h.quatern_y, h.quatern_z].map(f64::from);
    std::array::from_fn(|row| {
        [
            r[row][0] * scale[0],
            r[row][1] * scale[1],
            r[row][2] * scale[2],
            offset[row],
        ]
    })
}

fn det3(m: &[[f64; 4]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

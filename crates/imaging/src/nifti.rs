//! NIfTI-1 volumes (`.nii`, `.nii.gz`) into a [`Volume`]: scaling by scl_slope/scl_inter, orientation from the
//! sform (else the qform, else the voxel sizes alone), and one 3-D volume out of a 4-D file.

use std::io::Read;
use std::path::Path;

use nifti::NiftiHeader;

use crate::meta::{axis_codes, plane_of_normal, VolumeMeta};
use crate::volume::{FileBytes, RawVoxels, Scalar, Volume, Voxels};
use crate::{limits, ImageFormat, VolumeError};

/// Loads volume `index` (0 for a 3-D file) of a NIfTI file, gzipped or not (told apart by its bytes).
pub fn load(path: &Path, index: Option<usize>) -> Result<(Volume, VolumeMeta), VolumeError> {
    let bytes = read(path)?;
    let err = |message: String| VolumeError::Nifti {
        path: path.to_path_buf(),
        message,
    };
    refuse_nifti2(&bytes).map_err(&err)?;
    let header = NiftiHeader::from_reader(std::io::Cursor::new(&bytes[..]))
        .map_err(|e| err(format!("cannot parse the header: {e}")))?;
    let dims = spatial_dims(&header).map_err(&err)?;
    let volumes = volume_count(&header);
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
    refuse_nifti2(&head).map_err(&err)?;
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
    meta.volumes = volume_count(header);
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
    std::io::Seek::rewind(&mut file).map_err(read_err)?;
    let compressed = file.metadata().map_err(read_err)?.len();
    inflate(path, file, compressed)
}

/// Inflates a `.nii.gz` stream, refusing one that grows past [`limits::inflate_cap`] before it can exhaust
/// memory: `take` stops the decoder one byte past the cap.
fn inflate(path: &Path, file: std::fs::File, compressed: u64) -> Result<FileBytes, VolumeError> {
    let cap = limits::inflate_cap(compressed);
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(std::io::BufReader::new(file))
        .take(cap + 1)
        .read_to_end(&mut out)
        .map_err(|e| VolumeError::Nifti {
            path: path.to_path_buf(),
            message: format!("cannot decompress the gzip stream: {e}"),
        })?;
    if out.len() as u64 > cap {
        return Err(VolumeError::Nifti {
            path: path.to_path_buf(),
            message: format!(
                "the gzip stream of {compressed} bytes inflates to more than {cap} bytes; the limit is {} times \
                 the compressed size, at least {} MiB and at most {} GiB",
                limits::MAX_INFLATE_RATIO,
                limits::INFLATE_FLOOR >> 20,
                limits::max_inflated() >> 30
            ),
        });
    }
    Ok(FileBytes::Owned(out))
}

/// NIfTI-2 shares NIfTI-1's file names but not its header; the `nifti` crate would only say "Invalid NIfTI-1".
fn refuse_nifti2(head: &[u8]) -> Result<(), String> {
    if head.len() >= 8 && (&head[4..8] == b"n+2\0" || &head[4..8] == b"ni2\0") {
        return Err("NIfTI-2 files are not supported; expected NIfTI-1 (.nii or .nii.gz)".into());
    }
    Ok(())
}

/// The header's `dim` as the signed shorts NIfTI-1 stores (the `nifti` crate reads them unsigned, so -4 would
/// become 65532).
fn signed_dims(h: &NiftiHeader) -> [i16; 8] {
    h.dim.map(|d| d as i16)
}

fn volume_count(h: &NiftiHeader) -> usize {
    let dim = signed_dims(h);
    if dim[0] >= 4 {
        dim[4].max(1) as usize
    } else {
        1
    }
}

fn spatial_dims(h: &NiftiHeader) -> Result<[usize; 3], String> {
    let dim = signed_dims(h);
    let rank = dim[0];
    if !(2..=7).contains(&rank) {
        return Err(format!("dim[0] is {rank}; expected 2 to 7 dimensions"));
    }
    let rank = rank as usize;
    if let Some(i) = (1..=rank).find(|&i| dim[i] <= 0) {
        return Err(format!(
            "dim[{i}] is {}; expected a size of at least 1 along each of the {rank} dimensions",
            dim[i]
        ));
    }
    if rank > 4 && dim[5..=rank].iter().any(|&d| d > 1) {
        return Err(format!(
            "{rank}-D data with extra dimensions {:?}; expected a 3-D or 4-D volume",
            &dim[5..=rank]
        ));
    }
    let d = |i: usize| if i <= rank { dim[i] as usize } else { 1 };
    Ok([d(1), d(2), d(3)])
}

/// The voxel-to-RAS affine: sform when set, else qform, else the voxel sizes alone (as nibabel does). A
/// non-finite value in the fields used is an error naming the field.
fn affine(h: &NiftiHeader, dims: [usize; 3]) -> Result<[[f64; 4]; 3], String> {
    if h.sform_code > 0 {
        let rows = [
            ("srow_x", h.srow_x),
            ("srow_y", h.srow_y),
            ("srow_z", h.srow_z),
        ];
        if let Some((name, row)) = rows.iter().find(|(_, r)| r.iter().any(|v| !v.is_finite())) {
            return Err(format!(
                "{name} is {row:?} (sform_code {}); expected finite numbers",
                h.sform_code
            ));
        }
        let rows = rows.map(|(_, r)| r.map(f64::from));
        if det3(&rows) != 0.0 {
            return Ok(rows);
        }
    }
    let s = voxel_sizes(h)?;
    if h.qform_code > 0 {
        return qform(h, s);
    }
    // No orientation at all: nibabel's fallback, x flipped (radiological storage) and centred.
    Ok([
        [-s[0], 0.0, 0.0, (dims[0] as f64 - 1.0) / 2.0 * s[0]],
        [0.0, s[1], 0.0, -(dims[1] as f64 - 1.0) / 2.0 * s[1]],
        [0.0, 0.0, s[2], -(dims[2] as f64 - 1.0) / 2.0 * s[2]],
    ])
}

/// pixdim[1..=3], with zero read as 1 mm as nibabel does; NaN or infinity is an error, not a silent 1 mm.
fn voxel_sizes(h: &NiftiHeader) -> Result<[f64; 3], String> {
    if let Some(i) = (0..=3).find(|&i| !h.pixdim[i].is_finite()) {
        return Err(format!(
            "pixdim[{i}] is {}; expected a finite voxel size",
            h.pixdim[i]
        ));
    }
    Ok(std::array::from_fn(|a| {
        let v = f64::from(h.pixdim[a + 1]).abs();
        if v > 0.0 {
            v
        } else {
            1.0
        }
    }))
}

fn qform(h: &NiftiHeader, s: [f64; 3]) -> Result<[[f64; 4]; 3], String> {
    let fields = [
        ("quatern_b", h.quatern_b),
        ("quatern_c", h.quatern_c),
        ("quatern_d", h.quatern_d),
        ("qoffset_x", h.quatern_x),
        ("qoffset_y", h.quatern_y),
        ("qoffset_z", h.quatern_z),
    ];
    if let Some((name, v)) = fields.iter().find(|(_, v)| !v.is_finite()) {
        return Err(format!(
            "{name} is {v} (qform_code {}); expected a finite number",
            h.qform_code
        ));
    }
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
    Ok(std::array::from_fn(|row| {
        [
            r[row][0] * scale[0],
            r[row][1] * scale[1],
            r[row][2] * scale[2],
            offset[row],
        ]
    }))
}

fn det3(m: &[[f64; 4]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}

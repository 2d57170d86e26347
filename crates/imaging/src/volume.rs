//! A scalar volume in patient space: voxels, their spacing, and where each voxel lies in RAS millimetres.
//!
//! Loaders (DICOM, NIfTI) build a [`Volume`] in whatever order the file stores it; [`Volume::to_ras`] then
//! permutes and flips the axes (never resamples) so that the voxel axes run Right, Anterior, Superior. After that
//! "axial" means a slice across the third axis whatever the storage order was.

use std::sync::Arc;

/// A 3-D scalar volume: a view (dimensions, strides) over voxels that may be shared with other views.
///
/// Reorienting ([`Volume::to_ras`]) only changes the view, never copies voxels, and a NIfTI file's voxels stay
/// in their stored type until read: a render touches the slices it shows and a sample for the window, not the
/// whole volume.
#[derive(Debug, Clone)]
pub struct Volume {
    pub dims: [usize; 3],
    /// Millimetres between neighbouring voxels along each voxel axis.
    pub spacing: [f64; 3],
    /// Voxel index to RAS millimetres: `ras[r] = affine[r][0]*i + affine[r][1]*j + affine[r][2]*k + affine[r][3]`.
    pub affine: [[f64; 4]; 3],
    voxels: Arc<Voxels>,
    /// Storage index of voxel (i, j, k): `offset + i*strides[0] + j*strides[1] + k*strides[2]`.
    strides: [isize; 3],
    offset: isize,
    /// Slices stacked at uneven distances (a DICOM series with gaps): the voxel axis they were stacked along
    /// and each slice's real position (mm) along the RAS axis that axis runs along. The affine then holds only
    /// the median step, so positions come from here.
    pub stack: Option<(usize, Vec<f64>)>,
}

/// Where voxel values live.
#[derive(Debug)]
pub enum Voxels {
    /// Decoded values, x fastest.
    F32(Vec<f32>),
    /// A file's bytes, read on access.
    Raw(RawVoxels),
}

/// A file's bytes: read into memory (a decompressed .nii.gz), or mapped (a plain .nii), so that a render reads
/// only the pages it touches, as ripgrep maps large files.
#[derive(Debug)]
pub enum FileBytes {
    Owned(Vec<u8>),
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for FileBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Owned(v) => v,
            FileBytes::Mapped(m) => m,
        }
    }
}

/// Voxels as a file stores them: a scalar type, a byte order, and a linear scaling.
#[derive(Debug)]
pub struct RawVoxels {
    pub bytes: FileBytes,
    /// Byte offset of the first voxel.
    pub start: usize,
    pub scalar: Scalar,
    pub big_endian: bool,
    /// Value = stored * slope + inter (NIfTI's scl_slope / scl_inter; slope 0 means no scaling).
    pub slope: f32,
    pub inter: f32,
}

/// Stored voxel types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    U64,
    I64,
    F32,
    F64,
}

impl Scalar {
    pub fn size(self) -> usize {
        match self {
            Scalar::U8 | Scalar::I8 => 1,
            Scalar::U16 | Scalar::I16 => 2,
            Scalar::U32 | Scalar::I32 | Scalar::F32 => 4,
            Scalar::U64 | Scalar::I64 | Scalar::F64 => 8,
        }
    }
}

impl RawVoxels {
    fn get(&self, n: usize) -> f32 {
        let mut one = [0.0];
        self.fill(n as isize, 1, &mut one);
        one[0]
    }

    /// `out[t]` = voxel `first + t * step`; the type is matched once per line, not per voxel.
    fn fill(&self, first: isize, step: isize, out: &mut [f32]) {
        let bytes: &[u8] = &self.bytes;
        let big = self.big_endian;
        let start = self.start as isize;
        macro_rules! typed {
            ($t:ty) => {{
                const N: usize = std::mem::size_of::<$t>();
                for (t, o) in out.iter_mut().enumerate() {
                    let at = (start + (first + t as isize * step) * N as isize) as usize;
                    let mut a = [0u8; N];
                    a.copy_from_slice(&bytes[at..at + N]);
                    let v = if big {
                        <$t>::from_be_bytes(a)
                    } else {
                        <$t>::from_le_bytes(a)
                    };
                    *o = v as f32;
                }
            }};
        }
        match self.scalar {
            Scalar::U8 => typed!(u8),
            Scalar::I8 => typed!(i8),
            Scalar::U16 => typed!(u16),
            Scalar::I16 => typed!(i16),
            Scalar::U32 => typed!(u32),
            Scalar::I32 => typed!(i32),
            Scalar::U64 => typed!(u64),
            Scalar::I64 => typed!(i64),
            Scalar::F32 => typed!(f32),
            Scalar::F64 => typed!(f64),
        }
        if self.slope != 0.0 {
            out.iter_mut()
                .for_each(|v| *v = *v * self.slope + self.inter);
        }
    }
}

impl Voxels {
    fn get(&self, n: usize) -> f32 {
        match self {
            Voxels::F32(v) => v[n],
            Voxels::Raw(r) => r.get(n),
        }
    }

    fn fill(&self, first: isize, step: isize, out: &mut [f32]) {
        match self {
            Voxels::F32(v) => {
                for (t, o) in out.iter_mut().enumerate() {
                    *o = v[(first + t as isize * step) as usize];
                }
            }
            Voxels::Raw(r) => r.fill(first, step, out),
        }
    }
}

/// A RAS world axis: 0 = left→right, 1 = posterior→anterior, 2 = inferior→superior.
pub type Axis = usize;

impl Volume {
    /// A volume over decoded values stored x fastest (`data.len()` must be the product of `dims`).
    pub fn from_f32(
        dims: [usize; 3],
        spacing: [f64; 3],
        affine: [[f64; 4]; 3],
        data: Vec<f32>,
    ) -> Volume {
        Volume::over(dims, spacing, affine, Voxels::F32(data))
    }

    /// A volume over voxels stored x fastest, in whatever form.
    pub fn over(
        dims: [usize; 3],
        spacing: [f64; 3],
        affine: [[f64; 4]; 3],
        voxels: Voxels,
    ) -> Volume {
        Volume {
            dims,
            spacing,
            affine,
            voxels: Arc::new(voxels),
            strides: [1, dims[0] as isize, (dims[0] * dims[1]) as isize],
            offset: 0,
            stack: None,
        }
    }

    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Refuses geometry that would make positions meaningless: a non-finite affine entry, spacing or stacked
    /// slice position (a header's NaN, or an overflow of its products).
    pub fn check_geometry(&self) -> Result<(), String> {
        if let Some((r, c)) = (0..3)
            .flat_map(|r| (0..4).map(move |c| (r, c)))
            .find(|&(r, c)| !self.affine[r][c].is_finite())
        {
            return Err(format!(
                "the voxel-to-world affine has a non-finite entry at row {r}, column {c} ({:?}); expected finite \
                 orientation, spacing and position",
                self.affine
            ));
        }
        if let Some(s) = self.spacing.iter().find(|s| !s.is_finite() || **s <= 0.0) {
            return Err(format!(
                "voxel spacing {s} mm; expected a finite spacing above 0"
            ));
        }
        if let Some((_, mm)) = &self.stack {
            if mm.iter().any(|p| !p.is_finite()) {
                return Err(
                    "a slice position is not finite; expected finite ImagePositionPatient values"
                        .into(),
                );
            }
        }
        Ok(())
    }

    pub fn at(&self, i: usize, j: usize, k: usize) -> f32 {
        let n = self.offset
            + i as isize * self.strides[0]
            + j as isize * self.strides[1]
            + k as isize * self.strides[2];
        self.voxels.get(n as usize)
    }

    /// Fills `out` with the values along voxel axis `axis` from voxel `from`, walking backwards when `reverse`.
    pub fn line(&self, from: [usize; 3], axis: usize, reverse: bool, out: &mut [f32]) {
        let first = self.offset
            + from[0] as isize * self.strides[0]
            + from[1] as isize * self.strides[1]
            + from[2] as isize * self.strides[2];
        let step = if reverse {
            -self.strides[axis]
        } else {
            self.strides[axis]
        };
        self.voxels.fill(first, step, out);
    }

    /// The same voxels with axes permuted and flipped to the closest RAS orientation (as nibabel's
    /// `as_closest_canonical`). Oblique volumes are not resampled: each voxel axis goes to the world axis it runs
    /// most nearly along. Only the view changes; no voxel is copied.
    pub fn to_ras(&self) -> Volume {
        let (perm, flip) = closest_axes(&self.affine);
        let old = self.dims;
        let dims = [old[perm[0]], old[perm[1]], old[perm[2]]];
        let spacing = [
            self.spacing[perm[0]],
            self.spacing[perm[1]],
            self.spacing[perm[2]],
        ];
        let mut offset = self.offset;
        let strides: [isize; 3] = std::array::from_fn(|w| {
            let s = self.strides[perm[w]];
            if flip[w] {
                offset += (old[perm[w]] as isize - 1) * s;
                -s
            } else {
                s
            }
        });
        let stack = self.stack.as_ref().map(|(axis, mm)| {
            let w = (0..3).find(|&w| perm[w] == *axis).unwrap_or(*axis);
            let mut mm = mm.clone();
            if flip[w] {
                mm.reverse();
            }
            (w, mm)
        });
        Volume {
            dims,
            spacing,
            affine: reoriented_affine(&self.affine, old, perm, flip),
            voxels: self.voxels.clone(),
            strides,
            offset,
            stack,
        }
    }

    /// World position (mm) of voxel index `n` along RAS axis `axis`, for a volume already in RAS order.
    pub fn position_mm(&self, axis: Axis, n: usize) -> f64 {
        match &self.stack {
            Some((a, mm)) if *a == axis && n < mm.len() => mm[n],
            _ => self.affine[axis][axis] * n as f64 + self.affine[axis][3],
        }
    }

    /// The voxel index along `axis` nearest to world position `mm`, if inside the volume.
    pub fn index_at_mm(&self, axis: Axis, mm: f64) -> Option<usize> {
        if let Some((_, list)) = self.stack.as_ref().filter(|(a, _)| *a == axis) {
            let tolerance = self.spacing[axis] / 2.0 + 1e-6;
            return (0..list.len())
                .min_by(|&x, &y| (list[x] - mm).abs().total_cmp(&(list[y] - mm).abs()))
                .filter(|&n| (list[n] - mm).abs() <= tolerance);
        }
        let step = self.affine[axis][axis];
        if step == 0.0 {
            return None;
        }
        let n = ((mm - self.affine[axis][3]) / step).round();
        (n >= 0.0 && (n as usize) < self.dims[axis]).then_some(n as usize)
    }

    /// Percentiles of the volume's finite values, from about 200,000 voxels: whole rows of the stored order,
    /// evenly spread, so that a mapped file is read in a few runs rather than page by page.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<f32> {
        let row = self.dims[0].max(1);
        let rows = self.len() / row;
        let every = (self.len() / 200_000).max(1);
        let mut line = vec![0.0; row];
        let mut sample: Vec<f32> = Vec::with_capacity(200_000 + row);
        for r in (0..rows).step_by(every) {
            self.voxels.fill((r * row) as isize, 1, &mut line);
            sample.extend(line.iter().copied().filter(|v| v.is_finite()));
        }
        if sample.is_empty() {
            return vec![0.0; ps.len()];
        }
        let last = sample.len() - 1;
        ps.iter()
            .map(|p| {
                let idx = (((p / 100.0) * last as f64).round() as usize).min(last);
                *sample.select_nth_unstable_by(idx, f32::total_cmp).1
            })
            .collect()
    }
}

/// For each RAS axis, which voxel axis runs most nearly along it, and whether it runs backwards.
///
/// Loaders refuse non-finite affines ([`Volume::check_geometry`]); a NaN that got here anyway counts as zero, so
/// every axis is still assigned and indexing with the permutation cannot go out of bounds.
fn closest_axes(affine: &[[f64; 4]; 3]) -> ([usize; 3], [bool; 3]) {
    let magnitude = |v: f64| if v.is_finite() { v.abs() } else { 0.0 };
    let mut perm = [0; 3];
    let mut flip = [false; 3];
    let mut used_world = [false; 3];
    let mut used_voxel = [false; 3];
    // Greedy on the largest remaining component, so a nearly-diagonal direction cannot claim two axes.
    for _ in 0..3 {
        let mut best: Option<(usize, usize, f64)> = None;
        for (w, row) in affine.iter().enumerate() {
            for (a, value) in row.iter().take(3).enumerate() {
                let free = !used_world[w] && !used_voxel[a];
                if free && best.is_none_or(|b| magnitude(*value) > b.2) {
                    best = Some((w, a, magnitude(*value)));
                }
            }
        }
        let Some((w, a, _)) = best else { break };
        perm[w] = a;
        flip[w] = affine[w][a] < 0.0;
        used_world[w] = true;
        used_voxel[a] = true;
    }
    (perm, flip)
}

fn reoriented_affine(
    old: &[[f64; 4]; 3],
    dims: [usize; 3],
    perm: [usize; 3],
    flip: [bool; 3],
) -> [[f64; 4]; 3] {
    // The old voxel index that the new voxel (0, 0, 0) comes from.
    let mut origin_index = [0.0; 3];
    for w in 0..3 {
        if flip[w] {
            origin_index[perm[w]] = (dims[perm[w]] - 1) as f64;
        }
    }
    let mut out = [[0.0; 4]; 3];
    for r in 0..3 {
        for w in 0..3 {
            let sign = if flip[w] { -1.0 } else { 1.0 };
            out[r][w] = old[r][perm[w]] * sign;
        }
        out[r][3] = old[r][3] + (0..3).map(|a| old[r][a] * origin_index[a]).sum::<f64>();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(dims: [usize; 3], affine: [[f64; 4]; 3]) -> Volume {
        let data = (0..dims.iter().product::<usize>())
            .map(|n| n as f32)
            .collect();
        Volume::from_f32(dims, [1.0, 2.0, 3.0], affine, data)
    }

    #[test]
    fn flipped_and_permuted_storage_comes_back_to_ras() {
        let ras = ramp(
            [4, 3, 2],
            [
                [1.0, 0.0, 0.0, -2.0],
                [0.0, 2.0, 0.0, 5.0],
                [0.0, 0.0, 3.0, 7.0],
            ],
        );
        // Store the same voxels as (S, A, L): old axis 0 runs superior, 1 anterior, 2 towards the left.
        let mut data = Vec::new();
        for i in (0..4).rev() {
            for j in 0..3 {
                for k in 0..2 {
                    data.push(ras.at(i, j, k));
                }
            }
        }
        let stored = Volume::from_f32(
            [2, 3, 4],
            [3.0, 2.0, 1.0],
            [
                [0.0, 0.0, -1.0, 1.0],
                [0.0, 2.0, 0.0, 5.0],
                [3.0, 0.0, 0.0, 7.0],
            ],
            data,
        );
        let back = stored.to_ras();
        assert_eq!(back.dims, ras.dims);
        assert_eq!(back.spacing, ras.spacing);
        assert_eq!(back.affine, ras.affine);
        for (i, j, k) in
            (0..4).flat_map(|i| (0..3).flat_map(move |j| (0..2).map(move |k| (i, j, k))))
        {
            assert_eq!(back.at(i, j, k), ras.at(i, j, k), "voxel ({i},{j},{k})");
        }
        assert_eq!(back.percentiles(&[0.0, 100.0]), vec![0.0, 23.0]);
    }

    #[test]
    fn a_non_finite_affine_is_refused_and_never_indexes_out_of_bounds() {
        let mut affine = [
            [1.0, 0.0, 0.0, 0.0],
            [0.0, 1.0, 0.0, 0.0],
            [0.0, 0.0, 1.0, 0.0],
        ];
        affine[0][0] = f64::NAN;
        affine[1][1] = f64::INFINITY;
        let volume = ramp([2, 3, 4], affine);
        assert!(volume.check_geometry().unwrap_err().contains("non-finite"));
        let all_nan = ramp([2, 3, 4], [[f64::NAN; 4]; 3]);
        let ras = all_nan.to_ras();
        let mut dims = ras.dims;
        dims.sort();
        assert_eq!(dims, [2, 3, 4], "every axis is still assigned once");
        let _ = volume.to_ras().at(0, 0, 0);
    }
}

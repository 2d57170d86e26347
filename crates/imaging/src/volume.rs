//! A scalar volume in patient space: voxels, their spacing, and where each voxel lies in RAS millimetres.
//!
//! Loaders (DICOM, NIfTI) build a [`Volume`] in whatever order the file stores it; [`Volume::to_ras`] then
//! permutes and flips the axes (never resamples) so that the voxel axes run Right, Anterior, Superior. After that
//! "axial" means a slice across the third axis whatever the storage order was.

/// A 3-D scalar volume. Voxel `(i, j, k)` is at `data[i + dims[0] * (j + dims[1] * k)]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Volume {
    pub dims: [usize; 3],
    /// Millimetres between neighbouring voxels along each voxel axis.
    pub spacing: [f64; 3],
    /// Voxel index to RAS millimetres: `ras[r] = affine[r][0]*i + affine[r][1]*j + affine[r][2]*k + affine[r][3]`.
    pub affine: [[f64; 4]; 3],
    pub data: Vec<f32>,
    /// Slices stacked at uneven distances (a DICOM series with gaps): the storage axis they were stacked along
    /// and each slice's real position (mm) along the RAS axis that axis runs along. The affine then holds only
    /// the median step, so positions come from here.
    pub stack: Option<(usize, Vec<f64>)>,
}

/// A RAS world axis: 0 = left→right, 1 = posterior→anterior, 2 = inferior→superior.
pub type Axis = usize;

impl Volume {
    pub fn len(&self) -> usize {
        self.dims.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn at(&self, i: usize, j: usize, k: usize) -> f32 {
        self.data[i + self.dims[0] * (j + self.dims[1] * k)]
    }

    /// The same voxels with axes permuted and flipped to the closest RAS orientation (as nibabel's
    /// `as_closest_canonical`). Oblique volumes are not resampled: each voxel axis goes to the world axis it runs
    /// most nearly along.
    pub fn to_ras(&self) -> Volume {
        let (perm, flip) = closest_axes(&self.affine);
        if perm == [0, 1, 2] && flip == [false; 3] {
            return self.clone();
        }
        // new axis w takes old axis perm[w], reversed when flip[w].
        let old = self.dims;
        let dims = [old[perm[0]], old[perm[1]], old[perm[2]]];
        let spacing = [
            self.spacing[perm[0]],
            self.spacing[perm[1]],
            self.spacing[perm[2]],
        ];
        let old_stride = [1, old[0], old[0] * old[1]];
        let step: [isize; 3] = std::array::from_fn(|w| {
            let s = old_stride[perm[w]] as isize;
            if flip[w] {
                -s
            } else {
                s
            }
        });
        let start: isize = (0..3)
            .map(|w| {
                if flip[w] {
                    ((old[perm[w]] - 1) * old_stride[perm[w]]) as isize
                } else {
                    0
                }
            })
            .sum();
        let mut data = Vec::with_capacity(self.data.len());
        for z in 0..dims[2] {
            for y in 0..dims[1] {
                let row = start + step[1] * y as isize + step[2] * z as isize;
                data.extend((0..dims[0]).map(|x| self.data[(row + step[0] * x as isize) as usize]));
            }
        }
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
            data,
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

    /// Sorted sample of values, for percentiles.
    pub fn percentiles(&self, ps: &[f64]) -> Vec<f32> {
        let stride = (self.data.len() / 200_000).max(1);
        let mut sample: Vec<f32> = self
            .data
            .iter()
            .step_by(stride)
            .copied()
            .filter(|v| v.is_finite())
            .collect();
        if sample.is_empty() {
            return vec![0.0; ps.len()];
        }
        sample.sort_by(f32::total_cmp);
        ps.iter()
            .map(|p| {
                let idx = ((p / 100.0) * (sample.len() - 1) as f64).round() as usize;
                sample[idx.min(sample.len() - 1)]
            })
            .collect()
    }
}

/// For each RAS axis, which voxel axis runs most nearly along it, and whether it runs backwards.
fn closest_axes(affine: &[[f64; 4]; 3]) -> ([usize; 3], [bool; 3]) {
    let mut perm = [usize::MAX; 3];
    let mut flip = [false; 3];
    let mut used_world = [false; 3];
    let mut used_voxel = [false; 3];
    // Greedy on the largest remaining component, so a nearly-diagonal direction cannot claim two axes.
    for _ in 0..3 {
        let mut best = (0, 0, -1.0);
        for (w, row) in affine.iter().enumerate() {
            for (a, value) in row.iter().take(3).enumerate() {
                if !used_world[w] && !used_voxel[a] && value.abs() > best.2 {
                    best = (w, a, value.abs());
                }
            }
        }
        let (w, a, _) = best;
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
        Volume {
            dims,
            spacing: [1.0, 2.0, 3.0],
            affine,
            data,
            stack: None,
        }
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
        let stored = Volume {
            dims: [2, 3, 4],
            spacing: [3.0, 2.0, 1.0],
            affine: [
                [0.0, 0.0, -1.0, 1.0],
                [0.0, 2.0, 0.0, 5.0],
                [3.0, 0.0, 0.0, 7.0],
            ],
            data,
            stack: None,
        };
        let back = stored.to_ras();
        assert_eq!(back.dims, ras.dims);
        assert_eq!(back.spacing, ras.spacing);
        assert_eq!(back.data, ras.data);
        assert_eq!(back.affine, ras.affine);
    }
}

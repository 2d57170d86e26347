//! A tissue-label map of one synthetic brain slice: anatomy from a plane template, then lesions painted on top.
//!
//! Coordinates are normalised: u and v run from -1 to 1 across the image, u to the right and v downwards.
//! Axial and coronal slices follow the radiological convention (the patient's left is on the image's right);
//! axial has anterior at the top, coronal superior at the top, sagittal anterior on the left and superior on top.

use super::noise::{self, fbm};

/// Side of every generated image, in pixels.
pub const SIZE: usize = 224;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Background,
    Scalp,
    Bone,
    /// Subarachnoid CSF: sulci, fissures, cisterns.
    Csf,
    Ventricle,
    Gm,
    Wm,
    /// Basal ganglia and thalami.
    DeepGm,
    Hippocampus,
    // Lesions.
    Infarct,
    Plaque,
    ActivePlaque,
    Edema,
    Necrosis,
    Rim,
    Pus,
    Hematoma,
    SubarachnoidBlood,
    /// Cortex or deep grey matter with restricted diffusion (prion disease).
    Ribbon,
    /// Inflamed, swollen grey/white matter (encephalitis, ADEM).
    Inflammation,
    /// Chronic white-matter gliosis (small vessel disease).
    Gliosis,
    Lacune,
    Microbleed,
}

impl Label {
    pub fn is_lesion(self) -> bool {
        !matches!(
            self,
            Label::Background
                | Label::Scalp
                | Label::Bone
                | Label::Csf
                | Label::Ventricle
                | Label::Gm
                | Label::Wm
                | Label::DeepGm
                | Label::Hippocampus
        )
    }

    /// Inside the skull and not fluid: what "brain" means for region statistics.
    pub fn is_parenchyma(self) -> bool {
        !matches!(
            self,
            Label::Background | Label::Scalp | Label::Bone | Label::Csf | Label::Ventricle
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// Axial through the basal ganglia and thalami (foramen of Monro level).
    AxialGanglionic,
    /// Coronal through the hippocampal bodies and temporal lobes.
    CoronalHippocampal,
    /// Sagittal about 1.5 cm off the midline, through the lateral ventricle.
    SagittalParamedian,
}

/// Global anatomy settings of one slice.
#[derive(Debug, Clone, Copy)]
pub struct Anatomy {
    /// 0 for a young adult; 1 for marked global atrophy (wide sulci, large ventricles).
    pub atrophy: f64,
    /// 0 normal; 1 for severe hippocampal volume loss with enlarged temporal horns.
    pub hippocampal_atrophy: f64,
    pub seed: u64,
}

/// An ellipse, rotated, with an optionally irregular edge.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub cx: f64,
    pub cy: f64,
    pub rx: f64,
    pub ry: f64,
    pub angle_deg: f64,
    /// Edge irregularity as a fraction of the radius.
    pub rough: f64,
    /// Cosine and sine of the angle, computed once.
    cos: f64,
    sin: f64,
}

pub fn blob(cx: f64, cy: f64, rx: f64, ry: f64) -> Shape {
    Shape {
        cx,
        cy,
        rx,
        ry,
        angle_deg: 0.0,
        rough: 0.0,
        cos: 1.0,
        sin: 0.0,
    }
}

impl Shape {
    pub fn rot(mut self, deg: f64) -> Self {
        self.angle_deg = deg;
        let a = deg.to_radians();
        (self.cos, self.sin) = (noise::cos(a), noise::sin(a));
        self
    }
    pub fn rough(mut self, r: f64) -> Self {
        self.rough = r;
        self
    }
    /// The same shape reflected across the midline.
    pub fn mirror(mut self) -> Self {
        self.cx = -self.cx;
        self.rot(-self.angle_deg)
    }

    /// Pixel ranges (x, y) that can contain the shape: its bounding circle, clipped to the image.
    fn pixel_bounds(&self) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let reach = self.rx.max(self.ry) * (1.0 + self.rough);
        let to_px = |c: f64| ((c + 1.0) / 2.0 * SIZE as f64).clamp(0.0, SIZE as f64);
        let range = |c: f64| to_px(c - reach).floor() as usize..to_px(c + reach).ceil() as usize;
        (range(self.cx), range(self.cy))
    }

    /// Whether (u, v) lies inside the ellipse scaled by `scale`, rejecting far points without a square root.
    fn within(&self, u: f64, v: f64, scale: f64) -> bool {
        let reach = self.rx.max(self.ry) * scale;
        let (dx, dy) = (u - self.cx, v - self.cy);
        dx * dx + dy * dy <= reach * reach && self.radius(u, v) < scale
    }

    /// Normalised elliptical radius of (u, v): below 1 inside.
    fn radius(&self, u: f64, v: f64) -> f64 {
        let (c, s) = (self.cos, self.sin);
        let (dx, dy) = (u - self.cx, v - self.cy);
        let x = c * dx + s * dy;
        let y = -s * dx + c * dy;
        ((x / self.rx) * (x / self.rx) + (y / self.ry) * (y / self.ry)).sqrt()
    }

    fn contains(&self, u: f64, v: f64, seed: u64) -> bool {
        // Cheap rejection outside the bounding circle, before any noise is evaluated.
        let reach = self.rx.max(self.ry) * (1.0 + self.rough);
        let (dx, dy) = (u - self.cx, v - self.cy);
        if dx * dx + dy * dy > reach * reach {
            return false;
        }
        let r = self.radius(u, v);
        // The noisy edge stays within 1 ± rough, so only that band needs noise.
        if r >= 1.0 + self.rough || r < 1.0 - self.rough {
            return r < 1.0;
        }
        // Bumps a few per circumference whatever the lesion's size.
        let f = 2.4 / self.rx.min(self.ry);
        r < 1.0 + self.rough * (2.0 * fbm(u * f + 3.1, v * f - 1.7, 3, seed) - 1.0)
    }
}

/// Which existing tissue a lesion may replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Within {
    /// Grey and white matter, deep grey, hippocampus and earlier lesions.
    Parenchyma,
    /// White matter and earlier lesions.
    WhiteMatter,
    /// Cortex (and earlier lesions there).
    Cortex,
    /// Cortex, deep grey matter and hippocampus.
    GreyMatter,
    /// Subarachnoid CSF (sulci, fissures, cisterns).
    Subarachnoid,
    /// Anything inside the skull, ventricles included (space-occupying lesions).
    Intracranial,
}

#[derive(Debug, Clone, Copy)]
pub struct Lesion {
    pub label: Label,
    pub shape: Shape,
    pub within: Within,
}

pub fn lesion(label: Label, shape: Shape, within: Within) -> Lesion {
    Lesion {
        label,
        shape,
        within,
    }
}

/// Everything needed to draw one slice.
#[derive(Debug, Clone)]
pub struct Scene {
    pub template: Template,
    pub anatomy: Anatomy,
    pub lesions: Vec<Lesion>,
}

/// The labels of one slice, row-major, `SIZE` × `SIZE`.
pub struct LabelMap {
    pub labels: Vec<Label>,
    /// For pixels a lesion was painted on, the tissue that was there before.
    pub lesion_source: Vec<Option<Label>>,
    /// Fine tissue texture in [-1, 1): a property of the anatomy, so every sequence of a slice shares it.
    pub texture: Vec<f64>,
}

pub fn coord(i: usize) -> f64 {
    (i as f64 + 0.5) / SIZE as f64 * 2.0 - 1.0
}

pub fn draw(scene: &Scene) -> LabelMap {
    let mut labels = anatomy(scene.template, &scene.anatomy);
    let mut lesion_source = vec![None; labels.len()];
    for (k, l) in scene.lesions.iter().enumerate() {
        let seed = scene.anatomy.seed.wrapping_add(101 * (k as u64 + 1));
        paint(&mut labels, &mut lesion_source, l, seed);
    }
    let seed = scene.anatomy.seed ^ 0x7E47;
    let texture = (0..SIZE * SIZE)
        .map(|i| match labels[i] {
            Label::Background => 0.0,
            _ => 2.0 * fbm(coord(i % SIZE) * 22.0, coord(i / SIZE) * 22.0, 1, seed) - 1.0,
        })
        .collect();
    LabelMap {
        labels,
        lesion_source,
        texture,
    }
}

fn paint(labels: &mut [Label], source: &mut [Option<Label>], l: &Lesion, seed: u64) {
    let (xs, ys) = l.shape.pixel_bounds();
    for y in ys {
        for x in xs.clone() {
            let i = y * SIZE + x;
            if allowed(labels[i], l.within) && l.shape.contains(coord(x), coord(y), seed) {
                if source[i].is_none() {
                    source[i] = Some(labels[i]);
                }
                labels[i] = l.label;
            }
        }
    }
}

fn allowed(current: Label, within: Within) -> bool {
    use Label::*;
    let lesion = current.is_lesion() && current != SubarachnoidBlood;
    match within {
        Within::Parenchyma => lesion || matches!(current, Gm | Wm | DeepGm | Hippocampus),
        Within::WhiteMatter => lesion || current == Wm,
        Within::Cortex => current == Gm || (lesion && current != Hematoma),
        Within::GreyMatter => matches!(current, Gm | DeepGm | Hippocampus),
        Within::Subarachnoid => current == Csf,
        Within::Intracranial => !matches!(current, Background | Scalp | Bone),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Anatomy templates.

/// Sulci around one centre: about `n` clefts radiating inwards from the surface, up to `depth` pixels deep.
/// (Radial clefts around the cerebellum's centre give its fan of folia, the arbor vitae.)
#[derive(Debug, Clone, Copy)]
struct Folding {
    n: f64,
    depth: f64,
}

/// Parts of a template: outline ellipses, CSF clefts, ventricles, deep grey nuclei.
struct Parts {
    brain: Vec<Shape>,
    /// Sulcal patterns; each brain pixel uses the nearest centre.
    folding: Vec<(f64, f64, Folding)>,
    /// Soft tissue outside the skull (neck, face), drawn like scalp.
    soft_tissue: Vec<Shape>,
    /// Regions without sulci (the brainstem).
    smooth: Vec<Shape>,
    /// CSF clefts inside the outline: interhemispheric and Sylvian fissures, cisterns, the tentorium.
    fissures: Vec<Shape>,
    ventricles: Vec<Shape>,
    deep_gm: Vec<Shape>,
    hippocampi: Vec<Shape>,
}

fn parts(template: Template, a: &Anatomy) -> Parts {
    match template {
        Template::AxialGanglionic => axial(a),
        Template::CoronalHippocampal => coronal(a),
        Template::SagittalParamedian => sagittal(a),
    }
}

fn pair(s: Shape) -> [Shape; 2] {
    [s, s.mirror()]
}

fn cerebral(n: f64, a: &Anatomy) -> Folding {
    Folding {
        n,
        depth: 22.0 + 6.0 * a.atrophy,
    }
}

fn axial(a: &Anatomy) -> Parts {
    let v = 1.0 + 0.9 * a.atrophy; // ventricular enlargement
    let w = 1.0 + 1.2 * a.atrophy; // fissure widening
    let mut ventricles = Vec::new();
    ventricles.extend(pair(
        blob(
            0.075 + 0.01 * a.atrophy,
            -0.2,
            0.045 * v,
            0.13 * (0.8 + 0.2 * v),
        )
        .rot(-22.0),
    ));
    ventricles.push(blob(0.0, 0.04, 0.014 * v, 0.09));
    ventricles.extend(pair(blob(0.17, 0.36, 0.045 * v, 0.1 * v).rot(28.0)));
    let mut deep_gm = Vec::new();
    deep_gm.extend(pair(blob(0.15, -0.2, 0.045, 0.09).rot(-22.0)));
    deep_gm.extend(pair(blob(0.285, -0.02, 0.06, 0.15).rot(-8.0)));
    deep_gm.extend(pair(blob(0.095, 0.12, 0.075, 0.11).rot(10.0)));
    Parts {
        brain: vec![blob(0.0, 0.01, 0.69, 0.83)],
        folding: vec![(0.0, 0.0, cerebral(38.0, a))],
        smooth: vec![],
        soft_tissue: vec![],
        fissures: [
            vec![
                blob(0.0, -0.62, 0.012 * w, 0.3),
                blob(0.0, 0.64, 0.012 * w, 0.28),
            ],
            pair(blob(0.55, -0.01, 0.15, 0.014 * w).rot(-14.0)).to_vec(),
        ]
        .concat(),
        ventricles,
        deep_gm,
        hippocampi: vec![],
    }
}

fn coronal(a: &Anatomy) -> Parts {
    let v = 1.0 + 0.9 * a.atrophy;
    let w = 1.0 + 1.2 * a.atrophy;
    let h = 1.0 - 0.45 * a.hippocampal_atrophy;
    let horn = 1.0 + 1.6 * a.hippocampal_atrophy;
    let mut ventricles = Vec::new();
    ventricles.extend(pair(blob(0.09, -0.15, 0.07 * v, 0.04 * v).rot(-25.0)));
    ventricles.push(blob(0.0, 0.06, 0.013 * v, 0.07));
    ventricles.extend(pair(blob(0.33, 0.2, 0.04 * horn, 0.018 * horn).rot(-20.0)));
    Parts {
        brain: vec![
            blob(0.0, -0.14, 0.72, 0.6),
            blob(0.47, 0.3, 0.24, 0.2).rot(-10.0),
            blob(-0.47, 0.3, 0.24, 0.2).rot(10.0),
            blob(0.0, 0.56, 0.13, 0.42),
        ],
        smooth: vec![blob(0.0, 0.6, 0.16, 0.4)],
        soft_tissue: vec![blob(0.0, 0.95, 0.62, 0.5)],
        folding: vec![
            (0.0, -0.1, cerebral(36.0, a)),
            (
                0.5,
                0.33,
                Folding {
                    n: 10.0,
                    depth: 9.0,
                },
            ),
            (
                -0.5,
                0.33,
                Folding {
                    n: 10.0,
                    depth: 9.0,
                },
            ),
        ],
        fissures: [
            vec![blob(0.0, -0.6, 0.012 * w, 0.3)],
            pair(blob(0.55, 0.09, 0.19, 0.016 * w).rot(-12.0)).to_vec(),
            pair(blob(0.24, 0.43, 0.06, 0.035 * w).rot(35.0)).to_vec(),
        ]
        .concat(),
        ventricles,
        deep_gm: pair(blob(0.11, 0.03, 0.08, 0.09)).to_vec(),
        hippocampi: pair(blob(0.3, 0.27, 0.08 * h, 0.05 * h).rot(-15.0)).to_vec(),
    }
}

fn sagittal(a: &Anatomy) -> Parts {
    let v = 1.0 + 0.9 * a.atrophy;
    Parts {
        brain: vec![
            blob(-0.04, -0.1, 0.8, 0.56),
            blob(-0.3, 0.08, 0.4, 0.24).rot(-8.0),
            blob(0.38, 0.42, 0.3, 0.19).rot(-8.0),
            blob(0.04, 0.5, 0.1, 0.36).rot(-12.0),
        ],
        smooth: vec![blob(0.04, 0.56, 0.12, 0.34).rot(-12.0)],
        soft_tissue: vec![blob(0.12, 0.95, 0.55, 0.5)],
        folding: vec![
            (-0.04, -0.05, cerebral(40.0, a)),
            (
                0.38,
                0.43,
                Folding {
                    n: 30.0,
                    depth: 16.0,
                },
            ),
        ],
        fissures: vec![
            // The tentorium between the occipital lobe and the cerebellum.
            blob(0.42, 0.245, 0.25, 0.014).rot(-8.0),
        ],
        ventricles: vec![
            blob(-0.04, -0.05, 0.3 * (0.9 + 0.1 * v), 0.06 * v).rot(4.0),
            blob(0.24, 0.02, 0.09, 0.05 * v).rot(40.0),
        ],
        deep_gm: vec![blob(0.02, 0.08, 0.13, 0.08)],
        hippocampi: vec![],
    }
}

/// Draws the normal anatomy of a template.
fn anatomy(template: Template, a: &Anatomy) -> Vec<Label> {
    let p = parts(template, a);
    let mut brain = vec![false; SIZE * SIZE];
    for y in 0..SIZE {
        for x in 0..SIZE {
            brain[y * SIZE + x] = in_brain_outline(&p, coord(x), coord(y), a.seed);
        }
    }
    let outside: Vec<bool> = brain.iter().map(|b| !b).collect();
    let gap = chamfer(&outside);
    let mut labels: Vec<Label> = (0..SIZE * SIZE)
        .map(|i| {
            let (u, v) = (coord(i % SIZE), coord(i / SIZE));
            match head_layer(gap[i], a, u, v) {
                Label::Background if p.soft_tissue.iter().any(|s| s.within(u, v, 1.0)) => {
                    Label::Scalp
                }
                other => other,
            }
        })
        .collect();
    let depth = chamfer(&brain);
    carve_sulci(&p, a, &depth, &mut brain);
    let depth = chamfer(&brain);
    for i in 0..SIZE * SIZE {
        if brain[i] {
            // Cortex is the outer ~3 px of brain, following the sulci.
            labels[i] = if depth[i] <= 9 { Label::Gm } else { Label::Wm };
        }
    }
    inner_structures(&p, a.seed, &mut labels);
    labels
}

/// CSF, skull and scalp as layers at a distance from the brain (`gap`, chamfer units), so the skull follows
/// the brain's outline as the skull base does.
fn head_layer(gap: u32, a: &Anatomy, u: f64, v: f64) -> Label {
    let csf = 2.5 + 3.0 * a.atrophy;
    if gap == 0 {
        return Label::Csf; // inside the outline: fissures, later overwritten where there is brain
    }
    // The wobble is below 1.5 px, so far pixels are background without evaluating noise.
    if gap as f64 / 3.0 > csf + 12.5 {
        return Label::Background;
    }
    let wobble = 1.5 * (2.0 * fbm(u * 4.0, v * 4.0, 2, a.seed ^ 0x51) - 1.0);
    let px = gap as f64 / 3.0 + wobble;
    if px <= csf {
        Label::Csf
    } else if px <= csf + 6.5 {
        Label::Bone
    } else if px <= csf + 11.0 {
        Label::Scalp
    } else {
        Label::Background
    }
}

fn in_brain_outline(p: &Parts, u: f64, v: f64, seed: u64) -> bool {
    let r = p
        .brain
        .iter()
        .map(|s| s.radius(u, v))
        .fold(f64::MAX, f64::min);
    // The wobble is below 0.012, so only pixels near the edge need noise.
    if (r - 1.0).abs() > 0.013 {
        return r < 1.0;
    }
    let wobble = 0.012 * (2.0 * fbm(u * 5.0, v * 5.0, 2, seed ^ 0xB7) - 1.0);
    r < 1.0 + wobble
}

fn in_fissure(p: &Parts, u: f64, v: f64) -> bool {
    p.fissures.iter().any(|s| s.within(u, v, 1.0))
}

/// Cuts sulci and fissures into the brain.
fn carve_sulci(p: &Parts, a: &Anatomy, depth: &[u32], brain: &mut [bool]) {
    let width = 0.06 + 0.07 * a.atrophy;
    for y in 0..SIZE {
        for x in 0..SIZE {
            let i = y * SIZE + x;
            if !brain[i] {
                continue;
            }
            let (u, v) = (coord(x), coord(y));
            let smooth = p.smooth.iter().any(|s| s.within(u, v, 1.0));
            if in_fissure(p, u, v) || (!smooth && is_sulcus(p, a, width, depth[i], u, v)) {
                brain[i] = false;
            }
        }
    }
}

fn is_sulcus(p: &Parts, a: &Anatomy, width: f64, depth: u32, u: f64, v: f64) -> bool {
    let (cu, cv, folding) = nearest_centre(&p.folding, u, v);
    if depth as f64 >= folding.depth * 3.0 {
        return false; // deeper than any sulcus of this centre reaches
    }
    let wiggle = 2.6 * fbm(u * 4.0 + 7.0, v * 4.0 - 2.0, 3, a.seed ^ 0x5C);
    let theta = noise::atan2(v - cv, u - cu);
    let phase = folding.n * theta / (2.0 * std::f64::consts::PI) + wiggle;
    let k = phase.round();
    let d = (phase - k).abs();
    // Each sulcus gets its own depth, so deep and shallow ones alternate.
    let own = fbm(k * 0.61, 0.5, 1, a.seed ^ 0xD3);
    let reach = folding.depth * (0.25 + 0.75 * own);
    d < width && (depth as f64) < reach * 3.0
}

fn nearest_centre(centres: &[(f64, f64, Folding)], u: f64, v: f64) -> (f64, f64, Folding) {
    let mut best = centres[0];
    let mut best_d = f64::MAX;
    for &c in centres {
        let d = (u - c.0) * (u - c.0) + (v - c.1) * (v - c.1);
        if d < best_d {
            best_d = d;
            best = c;
        }
    }
    best
}

fn inner_structures(p: &Parts, seed: u64, labels: &mut [Label]) {
    for y in 0..SIZE {
        for x in 0..SIZE {
            let i = y * SIZE + x;
            if !matches!(labels[i], Label::Wm | Label::Gm) {
                continue;
            }
            let (u, v) = (coord(x), coord(y));
            let near = |s: &Shape| s.within(u, v, 1.05);
            if !(p.ventricles.iter().any(near)
                || p.hippocampi.iter().any(near)
                || p.deep_gm.iter().any(near))
            {
                continue; // the wobble is below 0.05: too far from every structure
            }
            let wob = 0.05 * (2.0 * fbm(u * 8.0, v * 8.0, 2, seed ^ 0x7E) - 1.0);
            if p.ventricles.iter().any(|s| s.within(u, v, 1.0 + wob)) {
                labels[i] = Label::Ventricle;
            } else if p.hippocampi.iter().any(|s| s.within(u, v, 1.0 + wob)) {
                labels[i] = Label::Hippocampus;
            } else if p.deep_gm.iter().any(|s| s.within(u, v, 1.0 + wob)) {
                labels[i] = Label::DeepGm;
            }
        }
    }
}

/// Distance from each `inside` pixel to the nearest outside pixel, in chamfer units (3 per pixel step,
/// 4 per diagonal step). Outside pixels are 0; pixels beyond the image edge count as inside.
fn chamfer(inside: &[bool]) -> Vec<u32> {
    const BIG: u32 = u32::MAX / 4;
    let n = SIZE;
    let mut d: Vec<u32> = inside.iter().map(|&b| if b { BIG } else { 0 }).collect();
    for y in 0..n {
        for x in 0..n {
            let i = y * n + x;
            let mut best = d[i];
            if x > 0 {
                best = best.min(d[i - 1] + 3);
            }
            if y > 0 {
                best = best.min(d[i - n] + 3);
                if x > 0 {
                    best = best.min(d[i - n - 1] + 4);
                }
                if x + 1 < n {
                    best = best.min(d[i - n + 1] + 4);
                }
            }
            d[i] = best;
        }
    }
    for y in (0..n).rev() {
        for x in (0..n).rev() {
            let i = y * n + x;
            let mut best = d[i];
            if x + 1 < n {
                best = best.min(d[i + 1] + 3);
            }
            if y + 1 < n {
                best = best.min(d[i + n] + 3);
                if x + 1 < n {
                    best = best.min(d[i + n + 1] + 4);
                }
                if x > 0 {
                    best = best.min(d[i + n - 1] + 4);
                }
            }
            d[i] = best;
        }
    }
    d
}

//! Demyelinating, infectious and autoimmune cases: MS, ADEM, brain abscess, HSV and anti-LGI1 encephalitis.

use super::super::phantom::{blob, lesion, Anatomy, Label, Lesion, Scene, Template, Within};
use super::{consult, dx, lesion_task, rationale_task, scene, shot, turn, CaseDef};
use crate::{Level, Sequence};

fn ms_axial() -> Vec<Lesion> {
    let wm = Within::WhiteMatter;
    vec![
        lesion(Label::Plaque, blob(0.16, -0.33, 0.03, 0.06).rot(-30.0), wm),
        lesion(
            Label::Plaque,
            blob(-0.17, -0.34, 0.032, 0.055).rot(28.0),
            wm,
        ),
        lesion(Label::Plaque, blob(0.27, 0.28, 0.03, 0.055).rot(35.0), wm),
        lesion(Label::Plaque, blob(0.25, 0.08, 0.025, 0.04).rot(10.0), wm),
        lesion(Label::ActivePlaque, blob(-0.3, 0.22, 0.04, 0.05), wm),
        lesion(Label::Plaque, blob(0.5, -0.38, 0.032, 0.026).rough(0.2), wm),
        lesion(Label::Plaque, blob(-0.52, 0.12, 0.028, 0.03).rough(0.2), wm),
    ]
}

fn ms_sagittal() -> Vec<Lesion> {
    [
        (-0.24, -0.19, -14.0),
        (-0.1, -0.21, -5.0),
        (0.05, -0.21, 4.0),
        (0.19, -0.18, 14.0),
    ]
    .iter()
    .map(|&(u, v, a)| {
        lesion(
            Label::Plaque,
            blob(u, v, 0.024, 0.075).rot(a),
            Within::WhiteMatter,
        )
    })
    .chain([lesion(
        Label::Plaque,
        blob(-0.45, -0.35, 0.03, 0.025),
        Within::WhiteMatter,
    )])
    .collect()
}

pub fn ms_relapsing() -> CaseDef {
    CaseDef {
        id: "ms_relapsing",
        disease: "Relapsing-remitting multiple sclerosis",
        group: "demyelinating",
        ehr: &[
            ("Age", "29"),
            ("Sex", "female"),
            (
                "Presenting complaint",
                "Numbness and tingling ascending from both feet over 5 days, with urinary urgency",
            ),
            ("Onset", "Subacute, over 5 days"),
            ("Vitals", "BP 118/74 mmHg, HR 72/min, temperature 36.6 °C"),
            (
                "Labs",
                "Full blood count, B12 and TSH normal; AQP4-IgG negative; CSF 4 cells/µL, protein 0.45 g/L, \
                 oligoclonal bands present in CSF and absent in serum",
            ),
            (
                "Relevant history",
                "18 months ago: painful blurred vision in the right eye that recovered over 6 weeks, not \
                 investigated",
            ),
            (
                "Neurological examination",
                "Right relative afferent pupillary defect, mild right optic disc pallor, brisk leg reflexes, \
                 right extensor plantar, vibration sense reduced to the knees, Lhermitte sign",
            ),
        ],
        notes: "No fever or systemic symptoms, no recent infection or vaccination. Visual evoked potentials: \
                delayed P100 on the right. Axial FLAIR, sagittal FLAIR and axial post-contrast T1 are attached.",
        scenes: vec![
            scene(Template::AxialGanglionic, 0.0, 21, ms_axial()),
            scene(Template::SagittalParamedian, 0.0, 22, ms_sagittal()),
        ],
        images: vec![
            shot(0, Sequence::Flair),
            shot(1, Sequence::Flair),
            shot(0, Sequence::T1c),
        ],
        tasks: vec![
            dx(
                Level::Direct,
                "Relapsing-remitting MS",
                &[
                    "relapsing-remitting multiple sclerosis",
                    "RRMS",
                    "multiple sclerosis",
                    "MS",
                ],
                &[
                    "Relapsing-remitting MS",
                    "Neuromyelitis optica spectrum disorder",
                    "MOG antibody-associated disease",
                    "Acute disseminated encephalomyelitis",
                    "Cerebral small vessel disease",
                ],
            ),
            lesion_task(
                Level::Direct,
                "Multiple ovoid T2/FLAIR-hyperintense demyelinating white-matter plaques, one enhancing after \
                 gadolinium (active lesion)",
                "Periventricular white matter of both hemispheres, with lesions perpendicular to the lateral \
                 ventricles (Dawson fingers) on the sagittal image, plus juxtacortical lesions; the enhancing \
                 lesion is in the right parietal periventricular white matter",
            ),
        ],
    }
}

fn abscess_lesions() -> Vec<Lesion> {
    vec![
        lesion(
            Label::Edema,
            blob(0.36, 0.24, 0.26, 0.28).rough(0.3),
            Within::WhiteMatter,
        ),
        lesion(
            Label::Rim,
            blob(0.38, 0.22, 0.115, 0.105).rough(0.04),
            Within::Intracranial,
        ),
        lesion(
            Label::Pus,
            blob(0.38, 0.22, 0.085, 0.075).rough(0.04),
            Within::Intracranial,
        ),
    ]
}

pub fn brain_abscess() -> CaseDef {
    let opening = "A single ring-enhancing lesion has been found. Based on the information so far, give a ranked \
                   differential diagnosis (up to 5) with the features for and against each.";
    let turns = vec![
        turn(
            "Diffusion-weighted imaging was added to the MRI: DWI (b=1000) and the ADC map at the same level are \
             attached.",
            vec![shot(0, Sequence::Dwi), shot(0, Sequence::Adc)],
            "How do the diffusion images change your differential? Re-rank it and say which finding matters most.",
        ),
        turn(
            "Further history from his wife: a lower molar was extracted 5 weeks ago for a dental abscess, and he \
             has had night sweats for two weeks. Bloods: WCC 14.2 ×10^9/L (neutrophils 11.5), CRP 68 mg/L; blood \
             cultures pending. Transthoracic echocardiogram: no vegetations.",
            vec![],
            "What is your final diagnosis, and what are the most important next steps in management?",
        ),
    ];
    let task = consult(
        dx(
            Level::MultiTurn,
            "Pyogenic brain abscess",
            &[
                "brain abscess",
                "cerebral abscess",
                "bacterial brain abscess",
                "odontogenic brain abscess",
            ],
            &[
                "Pyogenic brain abscess",
                "Glioblastoma",
                "Solitary brain metastasis",
                "Tumefactive demyelinating lesion",
                "Subacute infarct or resolving haematoma",
            ],
        ),
        opening,
        turns,
        "The rim is thin, smooth and complete, and the cavity shows marked restricted diffusion (bright on DWI, \
         dark on ADC), which indicates viscous pus rather than tumour necrosis, whose centre usually has high ADC. \
         A recent dental infection, night sweats, neutrophilia and a raised CRP give a plausible odontogenic \
         source. Management: neurosurgical aspiration for culture, empirical IV antibiotics covering oral \
         streptococci and anaerobes, and a dental source review.",
    );
    CaseDef {
        id: "brain_abscess",
        disease: "Pyogenic brain abscess (odontogenic)",
        group: "infectious",
        ehr: &[
            ("Age", "47"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Ten days of progressive headache and two days of word-finding difficulty",
            ),
            ("Onset", "Subacute"),
            ("Vitals", "BP 132/78 mmHg, HR 96/min, temperature 37.6 °C"),
            ("Labs", "Pending"),
            ("Relevant history", "Hypertension; otherwise well"),
            (
                "Neurological examination",
                "Alert, mild expressive dysphasia, right pronator drift, no neck stiffness, no papilloedema",
            ),
        ],
        notes: "Referred from the emergency department with an 'enhancing brain lesion, ?tumour'. The first MRI \
                (post-contrast T1 and FLAIR) is attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.1, 31, abscess_lesions())],
        images: vec![shot(0, Sequence::T1c), shot(0, Sequence::Flair)],
        tasks: vec![
            task,
            lesion_task(
                Level::Complex,
                "Ring-enhancing lesion with a smooth, thin, complete rim around a fluid-filled centre, with \
                 surrounding vasogenic oedema",
                "Left parietal lobe, subcortical and deep white matter lateral to the atrium of the left lateral \
                 ventricle",
            ),
        ],
    }
}

fn hsv_coronal() -> Vec<Lesion> {
    vec![
        lesion(
            Label::Inflammation,
            blob(0.34, 0.29, 0.16, 0.12).rough(0.2),
            Within::Parenchyma,
        ),
        lesion(
            Label::Inflammation,
            blob(0.34, 0.04, 0.07, 0.13).rough(0.2),
            Within::Parenchyma,
        ),
        lesion(
            Label::Inflammation,
            blob(0.52, 0.34, 0.17, 0.13).rough(0.2),
            Within::Cortex,
        ),
    ]
}

pub fn hsv_encephalitis() -> CaseDef {
    let opening = "Based on the information so far, give a ranked differential diagnosis (up to 5) and say what \
                   you would do immediately.";
    let turns = vec![
        turn(
            "MRI brain the next morning: coronal FLAIR and coronal DWI at the level of the hippocampi are attached.",
            vec![shot(1, Sequence::Flair), shot(1, Sequence::Dwi)],
            "Update your differential in the light of the MRI. What pattern do you see, and what does it suggest?",
        ),
        turn(
            "CSF: opening pressure 24 cmH2O, WCC 86/µL (92% lymphocytes), RBC 450/µL, protein 0.92 g/L, glucose \
             3.4 mmol/L (serum 6.0). CSF HSV-1 PCR positive; VZV and enterovirus PCR negative. EEG: left temporal \
             lateralised periodic discharges.",
            vec![],
            "What is the final diagnosis, and what treatment should be given?",
        ),
    ];
    let task = consult(
        dx(
            Level::MultiTurn,
            "Herpes simplex encephalitis",
            &[
                "HSV encephalitis",
                "HSV-1 encephalitis",
                "herpes simplex virus encephalitis",
                "HSE",
                "herpes encephalitis",
            ],
            &[
                "Herpes simplex (HSV-1) encephalitis",
                "Autoimmune limbic encephalitis",
                "Other viral encephalitis (VZV, enterovirus)",
                "Bacterial meningoencephalitis",
                "Seizures with peri-ictal MRI changes",
            ],
        ),
        opening,
        turns,
        "Febrile encephalopathy with a seizure, dysphasia and olfactory hallucinations localises to the left \
         temporal lobe. MRI shows asymmetric left mesial temporal, temporal cortical and insular FLAIR \
         hyperintensity with restricted diffusion and sparing of the basal ganglia, the classic HSV pattern. CSF \
         lymphocytic pleocytosis with red cells and a positive HSV-1 PCR confirm it; IV aciclovir should be \
         started at once, without waiting for the PCR.",
    );
    CaseDef {
        id: "hsv_encephalitis",
        disease: "Herpes simplex virus type 1 encephalitis",
        group: "infectious",
        ehr: &[
            ("Age", "58"),
            ("Sex", "female"),
            (
                "Presenting complaint",
                "Three days of fever and headache, then confusion and odd behaviour; one generalised seizure this \
                 morning",
            ),
            ("Onset", "Acute, over 3 days"),
            ("Vitals", "Temperature 38.9 °C, BP 142/86 mmHg, HR 108/min, RR 18/min, SpO2 97% on air"),
            (
                "Labs",
                "WCC 11.2 ×10^9/L, CRP 24 mg/L, sodium 136 mmol/L, glucose 6.1 mmol/L; renal and liver function \
                 normal",
            ),
            ("Relevant history", "No immunosuppression, no recent travel"),
            (
                "Neurological examination",
                "GCS 13 (E4 V3 M6), disoriented, fluent dysphasia with paraphasias, no neck stiffness, no focal \
                 motor deficit",
            ),
        ],
        notes: "Her husband says she was 'saying strange things' and kept smelling burning that was not there. \
                Non-contrast CT head on arrival is attached.",
        scenes: vec![
            scene(Template::AxialGanglionic, 0.2, 41, vec![]),
            scene(Template::CoronalHippocampal, 0.2, 42, hsv_coronal()),
        ],
        images: vec![shot(0, Sequence::Ct)],
        tasks: vec![task],
    }
}

fn lgi1_scene() -> Scene {
    let lesions = vec![
        lesion(
            Label::Inflammation,
            blob(-0.3, 0.27, 0.11, 0.075).rot(15.0).rough(0.1),
            Within::Parenchyma,
        ),
        lesion(
            Label::Inflammation,
            blob(0.3, 0.27, 0.085, 0.06).rot(-15.0).rough(0.1),
            Within::Parenchyma,
        ),
    ];
    Scene {
        template: Template::CoronalHippocampal,
        // Negative atrophy: swollen hippocampi with small temporal horns.
        anatomy: Anatomy {
            atrophy: 0.15,
            hippocampal_atrophy: -0.25,
            seed: 51,
        },
        lesions,
    }
}

pub fn lgi1_encephalitis() -> CaseDef {
    let diagnosis = "Anti-LGI1 encephalitis";
    let synonyms = [
        "anti-LGI1 limbic encephalitis",
        "LGI1 antibody encephalitis",
        "LGI1 autoimmune encephalitis",
        "autoimmune limbic encephalitis",
        "limbic encephalitis",
    ];
    CaseDef {
        id: "lgi1_encephalitis",
        disease: "Anti-LGI1 autoimmune limbic encephalitis",
        group: "autoimmune",
        ehr: &[
            ("Age", "64"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Two months of memory decline and many brief episodes of left arm and face posturing, up to 50 a day",
            ),
            ("Onset", "Subacute, over 8 weeks"),
            ("Vitals", "BP 136/82 mmHg, HR 70/min, temperature 36.7 °C"),
            (
                "Labs",
                "Sodium 127 mmol/L with low serum osmolality and inappropriately concentrated urine; CRP and full \
                 blood count normal",
            ),
            ("Relevant history", "Hypertension; no history of cancer"),
            (
                "Neurological examination",
                "Disoriented to date, recalls 0/3 words at 5 minutes; a 2-second dystonic posture of the left arm \
                 and face is observed; otherwise normal",
            ),
        ],
        notes: "The episodes are stereotyped, last 1-2 seconds and do not impair awareness. Routine EEG between \
                episodes is normal. CSF: 3 cells/µL, protein 0.5 g/L, oligoclonal bands negative, HSV PCR \
                negative. Coronal FLAIR and coronal post-contrast T1 are attached.",
        scenes: vec![lgi1_scene()],
        images: vec![shot(0, Sequence::Flair), shot(0, Sequence::T1c)],
        tasks: vec![
            dx(
                Level::Complex,
                diagnosis,
                &synonyms,
                &[
                    "Anti-LGI1 limbic encephalitis",
                    "Herpes simplex encephalitis",
                    "Paraneoplastic limbic encephalitis (e.g. anti-Hu, anti-Ma2)",
                    "Temporal lobe epilepsy with peri-ictal change",
                    "Low-grade glioma of the mesial temporal lobe",
                ],
            ),
            rationale_task(
                Level::Complex,
                diagnosis,
                &synonyms,
                "Subacute amnesia with very frequent, brief faciobrachial dystonic seizures and hyponatraemia is \
                 the characteristic triad of anti-LGI1 encephalitis. MRI shows bilateral, right more than left, \
                 mesial temporal FLAIR hyperintensity with swollen hippocampi and no enhancement, a limbic \
                 encephalitis pattern. The absence of fever, the near-normal CSF with a negative HSV PCR and the \
                 subacute course argue against HSV encephalitis; serum LGI1 antibodies confirm it, and tumour \
                 screening and immunotherapy follow.",
            ),
        ],
    }
}

fn adem_lesions() -> Vec<Lesion> {
    let p = Within::Parenchyma;
    vec![
        lesion(
            Label::Inflammation,
            blob(-0.38, -0.3, 0.17, 0.13).rough(0.3),
            p,
        ),
        lesion(
            Label::Inflammation,
            blob(0.38, 0.22, 0.18, 0.15).rough(0.3),
            p,
        ),
        lesion(
            Label::Inflammation,
            blob(0.1, 0.13, 0.07, 0.09).rough(0.2),
            p,
        ),
        lesion(
            Label::Inflammation,
            blob(-0.3, 0.5, 0.12, 0.1).rough(0.3),
            p,
        ),
    ]
}

pub fn adem() -> CaseDef {
    let opening = "Give a ranked differential diagnosis (up to 5) for this child based on the clinical picture and \
                   the MRI.";
    let turns = vec![
        turn(
            "CSF: WCC 24/µL (lymphocytes), protein 0.6 g/L, normal glucose; Gram stain and bacterial culture \
             negative; HSV and enterovirus PCR negative; oligoclonal bands absent.",
            vec![],
            "How does the CSF change your ranking?",
        ),
        turn(
            "Serum MOG-IgG is positive on a cell-based assay; AQP4-IgG is negative. Spinal MRI shows a T2 lesion \
             from C4 to C7. After IV methylprednisolone he improves steadily over 10 days.",
            vec![],
            "What is the final diagnosis?",
        ),
    ];
    let task = consult(
        dx(
            Level::MultiTurn,
            "ADEM",
            &[
                "acute disseminated encephalomyelitis",
                "MOG antibody-associated ADEM",
                "MOGAD presenting as ADEM",
                "post-infectious encephalomyelitis",
            ],
            &[
                "ADEM (MOG-IgG associated)",
                "Multiple sclerosis, first attack",
                "Viral encephalitis",
                "Neuromyelitis optica spectrum disorder (AQP4-IgG)",
                "CNS vasculitis",
            ],
        ),
        opening,
        turns,
        "Encephalopathy with multifocal deficits two weeks after a viral infection in a child, with large, \
         poorly marginated, asymmetric white-matter and thalamic lesions, is the ADEM picture. A lymphocytic CSF \
         without oligoclonal bands and negative viral PCRs favour ADEM over MS and infection, and MOG-IgG \
         positivity with a cervical cord lesion and a prompt steroid response places it within MOG \
         antibody-associated disease.",
    );
    CaseDef {
        id: "adem",
        disease: "Acute disseminated encephalomyelitis (MOG-IgG associated)",
        group: "demyelinating",
        ehr: &[
            ("Age", "7"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Two days of drowsiness, irritability and unsteady walking, two weeks after a febrile upper \
                 respiratory infection",
            ),
            ("Onset", "Acute"),
            ("Vitals", "Temperature 37.9 °C, BP 104/62 mmHg, HR 110/min, RR 22/min"),
            ("Labs", "WCC 12.0 ×10^9/L, CRP 18 mg/L, sodium 137 mmol/L, glucose normal"),
            ("Relevant history", "Fully vaccinated, previously well, no earlier neurological episodes"),
            (
                "Neurological examination",
                "GCS 12, left facial weakness, truncal ataxia, bilateral extensor plantars",
            ),
        ],
        notes: "MRI brain under sedation on the day of admission: axial FLAIR and T2 are attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.0, 61, adem_lesions())],
        images: vec![shot(0, Sequence::Flair), shot(0, Sequence::T2)],
        tasks: vec![
            task,
            lesion_task(
                Level::Complex,
                "Multiple large, poorly marginated, asymmetric T2/FLAIR-hyperintense demyelinating lesions",
                "Subcortical and deep white matter of the right frontal, left parietal and right \
                 parieto-occipital lobes, and the left thalamus",
            ),
        ],
    }
}

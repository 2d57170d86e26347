//! Progressive disorders: Alzheimer's disease, prion disease (CJD) and glioblastoma.

use super::super::phantom::{blob, lesion, Anatomy, Label, Lesion, Scene, Template, Within};
use super::{consult, dx, lesion_task, rationale_task, scene, shot, turn, CaseDef};
use crate::{Level, Sequence};

pub fn alzheimers() -> CaseDef {
    let diagnosis = "Alzheimer's disease";
    let synonyms = [
        "AD",
        "Alzheimer disease",
        "dementia due to Alzheimer's disease",
        "Alzheimer's dementia",
        "amnestic Alzheimer's disease",
    ];
    let coronal = Scene {
        template: Template::CoronalHippocampal,
        anatomy: Anatomy {
            atrophy: 0.6,
            hippocampal_atrophy: 0.9,
            seed: 71,
        },
        lesions: vec![],
    };
    let axial_wmh = vec![
        lesion(
            Label::Gliosis,
            blob(0.4, -0.3, 0.025, 0.02),
            Within::WhiteMatter,
        ),
        lesion(
            Label::Gliosis,
            blob(-0.35, 0.25, 0.02, 0.025),
            Within::WhiteMatter,
        ),
    ];
    CaseDef {
        id: "alzheimers",
        disease: diagnosis,
        group: "neurodegenerative",
        ehr: &[
            ("Age", "74"),
            ("Sex", "female"),
            ("Presenting complaint", "Progressive forgetfulness over 3 years"),
            ("Onset", "Insidious, gradually progressive"),
            ("Vitals", "BP 132/80 mmHg, HR 68/min"),
            (
                "Labs",
                "B12, folate, TSH, calcium, syphilis and HIV serology normal",
            ),
            (
                "Relevant history",
                "Hypercholesterolaemia; mother had dementia in her eighties; no strokes or head injury",
            ),
            (
                "Cognitive testing",
                "MoCA 17/30: delayed recall 0/5 not helped by cues, disoriented to date, impaired cube copy",
            ),
            (
                "Neurological examination",
                "No focal signs, no parkinsonism, normal gait",
            ),
        ],
        notes: "Her husband reports repeated questions, misplaced items and getting lost driving to familiar \
                places; she now needs help with finances. No visual hallucinations, fluctuations, REM sleep \
                behaviour disorder or personality change. The decline has been steady, never stepwise. Coronal T1 \
                and axial FLAIR are attached.",
        scenes: vec![
            coronal,
            scene(Template::AxialGanglionic, 0.6, 72, axial_wmh),
        ],
        images: vec![shot(0, Sequence::T1), shot(1, Sequence::Flair)],
        tasks: vec![
            dx(
                Level::Direct,
                diagnosis,
                &synonyms,
                &[
                    "Alzheimer's disease",
                    "Subcortical ischaemic vascular dementia",
                    "Dementia with Lewy bodies",
                    "Frontotemporal dementia",
                    "Normal pressure hydrocephalus",
                ],
            ),
            rationale_task(
                Level::Direct,
                diagnosis,
                &synonyms,
                "Insidious, steadily progressive episodic memory loss with delayed recall not helped by cues, \
                 later involving orientation and visuospatial function, points to an amnestic neurodegenerative \
                 dementia. MRI shows disproportionate bilateral hippocampal atrophy with enlarged temporal horns \
                 and widened choroidal fissures on a background of generalised atrophy, with only minimal \
                 white-matter change. Normal bloods exclude reversible causes, and the absence of hallucinations, \
                 parkinsonism, fluctuations, behavioural change or a stepwise course makes Lewy body, \
                 frontotemporal and vascular dementia less likely.",
            ),
        ],
    }
}

fn gbm_lesions() -> Vec<Lesion> {
    vec![
        lesion(
            Label::Edema,
            blob(-0.28, -0.3, 0.3, 0.32).rough(0.3),
            Within::WhiteMatter,
        ),
        lesion(
            Label::Rim,
            blob(-0.3, -0.38, 0.16, 0.14).rough(0.25),
            Within::Intracranial,
        ),
        lesion(
            Label::Necrosis,
            blob(-0.32, -0.39, 0.1, 0.085).rot(20.0).rough(0.35),
            Within::Intracranial,
        ),
    ]
}

pub fn glioblastoma() -> CaseDef {
    CaseDef {
        id: "glioblastoma",
        disease: "Glioblastoma, IDH-wildtype",
        group: "neoplastic",
        ehr: &[
            ("Age", "61"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Four weeks of worsening headache, personality change and left arm clumsiness; one focal seizure",
            ),
            ("Onset", "Subacute, progressive over weeks"),
            ("Vitals", "BP 138/84 mmHg, HR 80/min, temperature 36.9 °C"),
            ("Labs", "WCC 8.1 ×10^9/L, CRP 4 mg/L, sodium normal; HIV negative"),
            ("Relevant history", "No history of cancer, non-smoker, not immunosuppressed"),
            (
                "Neurological examination",
                "Disinhibited, mild left facial weakness and pronator drift, bilateral papilloedema",
            ),
        ],
        notes: "His wife reports two months of apathy and inappropriate remarks. No fever or weight loss. CT of \
                chest, abdomen and pelvis shows no primary tumour. Axial post-contrast T1, FLAIR, DWI and ADC are \
                attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.2, 81, gbm_lesions())],
        images: vec![
            shot(0, Sequence::T1c),
            shot(0, Sequence::Flair),
            shot(0, Sequence::Dwi),
            shot(0, Sequence::Adc),
        ],
        tasks: vec![
            lesion_task(
                Level::Direct,
                "Intra-axial mass with thick, irregular ring enhancement around central necrosis, surrounded by \
                 T2/FLAIR-hyperintense vasogenic oedema",
                "Right frontal lobe, deep white matter next to the right frontal horn",
            ),
            dx(
                Level::Complex,
                "Glioblastoma",
                &[
                    "glioblastoma multiforme",
                    "GBM",
                    "IDH-wildtype glioblastoma",
                    "high-grade glioma",
                    "grade 4 astrocytoma",
                ],
                &[
                    "Glioblastoma",
                    "Solitary brain metastasis",
                    "Pyogenic brain abscess",
                    "Primary CNS lymphoma",
                    "Tumefactive demyelinating lesion",
                ],
            ),
        ],
    }
}

fn cjd_lesions() -> Vec<Lesion> {
    let mut out = vec![
        lesion(
            Label::Ribbon,
            blob(-0.42, -0.22, 0.32, 0.45).rough(0.2),
            Within::Cortex,
        ),
        lesion(
            Label::Ribbon,
            blob(0.3, 0.55, 0.32, 0.25).rough(0.2),
            Within::Cortex,
        ),
        lesion(Label::Ribbon, blob(-0.05, -0.5, 0.07, 0.3), Within::Cortex),
    ];
    for s in [
        blob(0.16, -0.2, 0.06, 0.11).rot(-22.0),
        blob(0.28, -0.1, 0.075, 0.09),
    ] {
        out.push(lesion(Label::Ribbon, s, Within::GreyMatter));
        out.push(lesion(Label::Ribbon, s.mirror(), Within::GreyMatter));
    }
    out
}

pub fn cjd() -> CaseDef {
    let opening = "Based on the history and the first MRI, give a ranked differential diagnosis (up to 5) for this \
                   rapidly progressive dementia.";
    let turns = vec![
        turn(
            "The same MRI is reviewed with its diffusion sequences: DWI (b=1000) and ADC at the same level are \
             attached.",
            vec![shot(0, Sequence::Dwi), shot(0, Sequence::Adc)],
            "What pattern is present on diffusion, and how does it change your differential?",
        ),
        turn(
            "EEG: periodic sharp wave complexes at about 1 Hz. CSF: 2 cells/µL, protein 0.48 g/L, 14-3-3 protein \
             positive, total tau above 1200 pg/mL, RT-QuIC positive. Autoimmune encephalitis antibody panel \
             (serum and CSF) negative.",
            vec![],
            "What is the final diagnosis?",
        ),
    ];
    let task = consult(
        dx(
            Level::MultiTurn,
            "Sporadic CJD",
            &[
                "sporadic Creutzfeldt-Jakob disease",
                "sCJD",
                "Creutzfeldt-Jakob disease",
                "CJD",
                "prion disease",
            ],
            &[
                "Sporadic CJD",
                "Autoimmune encephalitis",
                "Rapidly progressive Alzheimer's disease or dementia with Lewy bodies",
                "Wernicke encephalopathy",
                "Toxic-metabolic or hypoxic-ischaemic encephalopathy",
            ],
        ),
        opening,
        turns,
        "A dementia progressing over weeks with ataxia, visual disturbance and startle myoclonus is a rapidly \
         progressive dementia. Diffusion shows cortical ribboning (gyriform cortical restricted diffusion, right \
         more than left) and restricted diffusion in both caudate \
         heads and anterior putamina, the typical sporadic CJD pattern, which is easily missed on FLAIR alone. \
         Periodic sharp wave complexes, 14-3-3, very high tau and a positive RT-QuIC with a negative antibody \
         panel confirm probable sporadic CJD.",
    );
    CaseDef {
        id: "cjd",
        disease: "Sporadic Creutzfeldt-Jakob disease",
        group: "neurodegenerative",
        ehr: &[
            ("Age", "66"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Rapidly progressive memory loss and unsteadiness over 10 weeks",
            ),
            ("Onset", "Subacute, relentlessly progressive"),
            ("Vitals", "BP 128/76 mmHg, HR 76/min, afebrile"),
            (
                "Labs",
                "Full blood count, renal and liver function, calcium, TSH, B12 and ammonia normal; HIV and \
                 syphilis negative",
            ),
            (
                "Relevant history",
                "Retired teacher; no travel, transfusion or neurosurgery; no family history of dementia",
            ),
            (
                "Neurological examination",
                "Disoriented, MoCA 9/30, limb and gait ataxia, startle-sensitive multifocal myoclonus, brisk \
                 reflexes",
            ),
        ],
        notes: "Three months ago he was working and independent; he now needs help dressing and sees 'shapes' in \
                the room. An initial MRI was reported as 'age-related changes'; its axial FLAIR is attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.3, 91, cjd_lesions())],
        images: vec![shot(0, Sequence::Flair)],
        tasks: vec![task],
    }
}

//! Cerebrovascular cases: ischaemic stroke, PRES, intracerebral and subarachnoid haemorrhage, small vessel disease.

use super::super::phantom::{blob, lesion, Label, Template, Within};
use super::{dx, lesion_task, rationale_task, scene, shot, CaseDef};
use crate::{Level, Sequence};

pub fn stroke_left_mca() -> CaseDef {
    let infarct = vec![
        lesion(
            Label::Infarct,
            blob(0.43, -0.05, 0.24, 0.34).rot(8.0).rough(0.12),
            Within::Parenchyma,
        ),
        lesion(
            Label::Infarct,
            blob(0.28, -0.03, 0.075, 0.13).rot(-8.0),
            Within::Parenchyma,
        ),
    ];
    CaseDef {
        id: "stroke_left_mca",
        disease: "Acute ischaemic stroke, left middle cerebral artery territory",
        group: "cerebrovascular",
        ehr: &[
            ("Age", "68"),
            ("Sex", "male"),
            ("Presenting complaint", "Sudden right-sided weakness and inability to speak"),
            ("Onset", "Witnessed, 3 hours before arrival; last known well at 08:10"),
            ("Vitals", "BP 178/96 mmHg, HR 92/min irregularly irregular, SpO2 96% on air, temperature 36.8 °C"),
            ("Labs", "Glucose 7.2 mmol/L, INR 1.0, platelets 245 ×10^9/L, troponin normal"),
            ("Relevant history", "Hypertension, type 2 diabetes, smoker (40 pack-years); no previous stroke"),
            ("Medications", "Metformin, amlodipine; no anticoagulant"),
            (
                "Neurological examination",
                "Global aphasia, right face and arm weaker than leg (arm MRC 2/5), right homonymous hemianopia, \
                 left gaze preference; NIHSS 17",
            ),
        ],
        notes: "Brought in by ambulance as a stroke alert. ECG shows atrial fibrillation at 90/min, not previously \
                known. Non-contrast CT on arrival was reported as showing no haemorrhage. An MRI stroke protocol \
                was obtained before the reperfusion decision.",
        scenes: vec![scene(Template::AxialGanglionic, 0.25, 11, infarct)],
        images: vec![
            shot(0, Sequence::Dwi),
            shot(0, Sequence::Adc),
            shot(0, Sequence::Flair),
        ],
        tasks: vec![
            dx(
                Level::Direct,
                "Acute ischaemic stroke in the left middle cerebral artery territory",
                &[
                    "left MCA infarct",
                    "acute left MCA stroke",
                    "acute ischemic stroke",
                    "cardioembolic stroke",
                    "cerebral infarction",
                ],
                &[
                    "Acute ischaemic stroke, left MCA territory (cardioembolic, atrial fibrillation)",
                    "Intracerebral haemorrhage",
                    "Post-ictal (Todd's) paresis",
                    "Hypoglycaemia or other metabolic stroke mimic",
                    "Brain tumour presenting acutely",
                ],
            ),
            lesion_task(
                Level::Direct,
                "Acute ischaemic infarct with restricted diffusion (DWI hyperintense, ADC hypointense), only \
                 faintly FLAIR hyperintense",
                "Left MCA territory: left insula, frontal operculum, lateral frontal, temporal and parietal \
                 cortex and subcortical white matter, and the left lentiform nucleus (putamen)",
            ),
        ],
    }
}

pub fn pres() -> CaseDef {
    let oedema = vec![
        lesion(
            Label::Edema,
            blob(0.32, 0.52, 0.24, 0.2).rot(-20.0).rough(0.3),
            Within::Parenchyma,
        ),
        lesion(
            Label::Edema,
            blob(-0.3, 0.54, 0.22, 0.18).rot(25.0).rough(0.3),
            Within::Parenchyma,
        ),
        lesion(
            Label::Edema,
            blob(-0.36, -0.48, 0.1, 0.08).rough(0.3),
            Within::Parenchyma,
        ),
    ];
    CaseDef {
        id: "pres",
        disease: "Posterior reversible encephalopathy syndrome",
        group: "cerebrovascular",
        ehr: &[
            ("Age", "34"),
            ("Sex", "female"),
            ("Presenting complaint", "Severe headache, blurred vision and two generalised tonic-clonic seizures"),
            ("Onset", "Acute, over 12 hours, 6 days after delivery"),
            ("Vitals", "BP 196/118 mmHg, HR 96/min, temperature 37.2 °C, SpO2 98% on air"),
            (
                "Labs",
                "Platelets 132 ×10^9/L, ALT 48 U/L, LDH 410 U/L, creatinine 98 µmol/L, urine protein:creatinine \
                 ratio 120 mg/mmol; magnesium normal",
            ),
            (
                "Relevant history",
                "First pregnancy, uncomplicated vaginal delivery; mild gestational hypertension in the third trimester",
            ),
            ("Medications", "None regularly; no immunosuppressants"),
            (
                "Neurological examination",
                "Drowsy but rousable; counts fingers only with reactive pupils and normal fundi; no focal \
                 weakness; brisk reflexes",
            ),
        ],
        notes: "No fever or neck stiffness. MR venography shows patent dural venous sinuses. Axial FLAIR, DWI and \
                ADC at the level of the basal ganglia are attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.05, 12, oedema)],
        images: vec![
            shot(0, Sequence::Flair),
            shot(0, Sequence::Dwi),
            shot(0, Sequence::Adc),
        ],
        tasks: vec![
            dx(
                Level::Complex,
                "PRES",
                &[
                    "posterior reversible encephalopathy syndrome",
                    "reversible posterior leukoencephalopathy syndrome",
                    "RPLS",
                    "postpartum PRES",
                ],
                &[
                    "PRES",
                    "Postpartum cerebral venous sinus thrombosis",
                    "Bilateral posterior cerebral artery infarction",
                    "Reversible cerebral vasoconstriction syndrome",
                    "Infectious or autoimmune encephalitis",
                ],
            ),
            lesion_task(
                Level::Complex,
                "Cortical-subcortical vasogenic oedema: T2/FLAIR hyperintense, without restricted diffusion \
                 (ADC raised)",
                "Both parieto-occipital lobes, roughly symmetric (posterior circulation territory), with a small \
                 right frontal focus",
            ),
        ],
    }
}

pub fn ich_hypertensive() -> CaseDef {
    let bleed = vec![
        lesion(
            Label::Edema,
            blob(0.29, -0.02, 0.135, 0.19).rot(-8.0).rough(0.15),
            Within::Parenchyma,
        ),
        lesion(
            Label::Hematoma,
            blob(0.29, -0.02, 0.1, 0.15).rot(-8.0).rough(0.1),
            Within::Intracranial,
        ),
        lesion(
            Label::Microbleed,
            blob(-0.1, 0.13, 0.014, 0.014),
            Within::Parenchyma,
        ),
        lesion(
            Label::Microbleed,
            blob(-0.27, 0.02, 0.014, 0.014),
            Within::Parenchyma,
        ),
        lesion(
            Label::Microbleed,
            blob(0.07, 0.17, 0.012, 0.012),
            Within::Parenchyma,
        ),
    ];
    CaseDef {
        id: "ich_hypertensive",
        disease: "Hypertensive intracerebral haemorrhage, left putamen",
        group: "cerebrovascular",
        ehr: &[
            ("Age", "63"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Sudden severe headache, vomiting and right-sided weakness while lifting at work",
            ),
            ("Onset", "Acute, 90 minutes before arrival; worsened over the first 30 minutes"),
            ("Vitals", "BP 214/122 mmHg, HR 64/min, SpO2 97%, temperature 36.9 °C; GCS 14"),
            ("Labs", "INR 1.0, platelets 260 ×10^9/L, glucose 6.4 mmol/L"),
            (
                "Relevant history",
                "Long-standing untreated hypertension, heavy alcohol use; no anticoagulant or antiplatelet",
            ),
            (
                "Neurological examination",
                "Right hemiparesis (arm 2/5, leg 3/5), right hemisensory loss, dysarthria, left gaze preference",
            ),
        ],
        notes: "ECG shows left ventricular hypertrophy. Non-contrast CT on arrival; MRI with susceptibility-weighted \
                imaging the next day.",
        scenes: vec![scene(Template::AxialGanglionic, 0.3, 13, bleed)],
        images: vec![shot(0, Sequence::Ct), shot(0, Sequence::Swi)],
        tasks: vec![
            dx(
                Level::Direct,
                "Hypertensive intracerebral haemorrhage in the left putamen",
                &[
                    "intracerebral hemorrhage",
                    "ICH",
                    "putaminal haemorrhage",
                    "hypertensive haemorrhage",
                    "basal ganglia haemorrhage",
                    "haemorrhagic stroke",
                ],
                &[
                    "Hypertensive deep (putaminal) intracerebral haemorrhage",
                    "Haemorrhagic transformation of an ischaemic infarct",
                    "Haemorrhage into an underlying tumour",
                    "Vascular malformation (arteriovenous malformation or cavernoma)",
                    "Cerebral amyloid angiopathy-related haemorrhage",
                ],
            ),
            lesion_task(
                Level::Direct,
                "Acute intraparenchymal haematoma: hyperdense on CT and dark (blooming) on SWI, with a thin rim of \
                 perihaematomal oedema; a few deep microbleeds",
                "Left putamen (lentiform nucleus, deep basal ganglia); microbleeds in both thalami and the right \
                 lentiform nucleus",
            ),
        ],
    }
}

pub fn sah_aneurysmal() -> CaseDef {
    let blood = vec![
        lesion(
            Label::SubarachnoidBlood,
            blob(0.0, -0.2, 0.8, 0.55),
            Within::Subarachnoid,
        ),
        lesion(
            Label::SubarachnoidBlood,
            blob(0.0, 0.0, 0.7, 0.2),
            Within::Subarachnoid,
        ),
        lesion(
            Label::SubarachnoidBlood,
            blob(0.18, 0.45, 0.05, 0.035),
            Within::Intracranial,
        ),
        lesion(
            Label::SubarachnoidBlood,
            blob(-0.18, 0.45, 0.05, 0.035),
            Within::Intracranial,
        ),
    ];
    let diagnosis = "Aneurysmal subarachnoid haemorrhage";
    let synonyms = [
        "subarachnoid hemorrhage",
        "SAH",
        "aneurysmal SAH",
        "ruptured intracranial aneurysm",
    ];
    CaseDef {
        id: "sah_aneurysmal",
        disease: diagnosis,
        group: "cerebrovascular",
        ehr: &[
            ("Age", "52"),
            ("Sex", "female"),
            (
                "Presenting complaint",
                "Sudden 'worst ever' headache reaching its maximum within seconds, then vomiting and neck pain",
            ),
            ("Onset", "Thunderclap, during exercise, 4 hours ago; brief loss of consciousness at onset"),
            ("Vitals", "BP 172/98 mmHg, HR 58/min, temperature 37.4 °C; GCS 14 (E3 V5 M6)"),
            ("Labs", "Full blood count, clotting and sodium normal"),
            (
                "Relevant history",
                "Smoker, hypertension; her sister had a 'brain bleed' at the age of 48",
            ),
            (
                "Neurological examination",
                "Photophobia, marked neck stiffness, positive Kernig sign, no focal deficit, no papilloedema",
            ),
        ],
        notes: "Non-contrast CT head obtained on arrival (attached).",
        scenes: vec![scene(Template::AxialGanglionic, 0.15, 14, blood)],
        images: vec![shot(0, Sequence::Ct)],
        tasks: vec![
            dx(
                Level::Direct,
                diagnosis,
                &synonyms,
                &[
                    "Aneurysmal subarachnoid haemorrhage",
                    "Perimesencephalic non-aneurysmal subarachnoid haemorrhage",
                    "Reversible cerebral vasoconstriction syndrome",
                    "Cerebral venous sinus thrombosis",
                    "Pituitary apoplexy",
                ],
            ),
            rationale_task(
                Level::Direct,
                diagnosis,
                &synonyms,
                "A thunderclap headache peaking within seconds with vomiting, brief loss of consciousness and \
                 meningism is subarachnoid haemorrhage until proven otherwise. CT shows hyperdense blood filling \
                 both Sylvian fissures, the anterior interhemispheric fissure and the convexity sulci, with blood \
                 layering in the occipital horns, a diffuse pattern typical of aneurysm rupture rather than the \
                 confined perimesencephalic pattern. Hypertension, smoking and a family history of haemorrhage \
                 raise the likelihood of an intracranial aneurysm, so CT angiography is the next step.",
            ),
        ],
    }
}

fn sivd_lesions() -> Vec<super::super::phantom::Lesion> {
    let wmh = [
        blob(0.11, -0.32, 0.12, 0.1).rough(0.3),
        blob(0.22, 0.43, 0.12, 0.12).rough(0.3),
        blob(0.19, 0.06, 0.07, 0.3).rough(0.3),
        blob(0.4, -0.33, 0.06, 0.05).rough(0.3),
        blob(0.38, 0.2, 0.05, 0.06).rough(0.3),
    ];
    let mut out = Vec::new();
    for s in wmh {
        out.push(lesion(Label::Gliosis, s, Within::WhiteMatter));
        out.push(lesion(
            Label::Gliosis,
            s.mirror().rough(0.35),
            Within::WhiteMatter,
        ));
    }
    for s in [
        blob(-0.28, -0.06, 0.022, 0.03),
        blob(0.1, 0.1, 0.02, 0.02),
        blob(0.36, -0.22, 0.025, 0.02),
    ] {
        out.push(lesion(Label::Lacune, s, Within::Parenchyma));
    }
    for s in [
        blob(-0.12, 0.15, 0.013, 0.013),
        blob(0.3, 0.02, 0.013, 0.013),
        blob(-0.24, -0.12, 0.012, 0.012),
        blob(0.08, 0.05, 0.012, 0.012),
        blob(-0.5, 0.1, 0.012, 0.012),
    ] {
        out.push(lesion(Label::Microbleed, s, Within::Parenchyma));
    }
    out
}

pub fn sivd() -> CaseDef {
    let diagnosis = "SIVD";
    let synonyms = [
        "subcortical ischaemic vascular dementia",
        "subcortical ischemic vascular dementia",
        "subcortical vascular dementia",
        "vascular dementia",
        "Binswanger disease",
        "cerebral small vessel disease",
    ];
    CaseDef {
        id: "sivd",
        disease: "Subcortical ischaemic vascular dementia (cerebral small vessel disease)",
        group: "cerebrovascular",
        ehr: &[
            ("Age", "76"),
            ("Sex", "male"),
            (
                "Presenting complaint",
                "Two years of slowed thinking, apathy and worsening gait with falls; urinary urgency",
            ),
            ("Onset", "Insidious, with two step-like worsenings"),
            ("Vitals", "BP 168/92 mmHg, HR 74/min"),
            (
                "Labs",
                "HbA1c 62 mmol/mol, LDL cholesterol 3.9 mmol/L, eGFR 58 mL/min; B12 and TSH normal",
            ),
            (
                "Relevant history",
                "Hypertension for 25 years, type 2 diabetes, ex-smoker; transient right-hand weakness 3 years ago",
            ),
            (
                "Cognitive testing",
                "MoCA 19/30: slowed processing, poor verbal fluency and trail-making; recall improves with cues",
            ),
            (
                "Neurological examination",
                "Brisk jaw jerk, short-stepped wide-based gait with preserved arm swing, no rest tremor, brisk \
                 reflexes",
            ),
        ],
        notes: "His wife says he has 'slowed down' and lost interest; memory for recent events is relatively \
                preserved. A levodopa trial gave no benefit. Axial FLAIR, T1 and SWI are attached.",
        scenes: vec![scene(Template::AxialGanglionic, 0.45, 15, sivd_lesions())],
        images: vec![
            shot(0, Sequence::Flair),
            shot(0, Sequence::T1),
            shot(0, Sequence::Swi),
        ],
        tasks: vec![
            dx(
                Level::Complex,
                diagnosis,
                &synonyms,
                &[
                    "SIVD",
                    "Alzheimer's disease with vascular contribution (mixed dementia)",
                    "Normal pressure hydrocephalus",
                    "Progressive supranuclear palsy",
                    "Dementia with Lewy bodies",
                ],
            ),
            lesion_task(
                Level::Direct,
                "Confluent T2/FLAIR white-matter hyperintensities of presumed vascular origin (Fazekas grade 3), \
                 several lacunes and cerebral microbleeds",
                "Periventricular and deep white matter of both hemispheres (frontal and occipital caps, bands \
                 along the lateral ventricles); lacunes in the right putamen, left thalamus and left frontal white \
                 matter; microbleeds in the deep grey nuclei",
            ),
            rationale_task(
                Level::Complex,
                diagnosis,
                &synonyms,
                "Slowed processing, executive dysfunction and apathy with relatively preserved cued recall, a \
                 short-stepped gait, urinary urgency and a stepwise course form a subcortical vascular syndrome. \
                 MRI shows confluent periventricular and deep white-matter hyperintensities, lacunes in the deep \
                 grey nuclei and white matter, and microbleeds, i.e. a heavy small vessel disease burden that \
                 matches long-standing hypertension and diabetes. The lack of prominent amnesia or medial temporal \
                 atrophy argues against Alzheimer's disease, the absence of levodopa response and of vertical gaze \
                 palsy against a parkinsonian disorder, and the ventricles are proportionate to the sulci rather \
                 than disproportionately enlarged as in normal pressure hydrocephalus.",
            ),
        ],
    }
}

//! The bundled sample suite plans in every input mode (it is built by nmb-suite and may still be small).

use nmb_plan::{plan, InputMode, PlanOptions, PlanSummary};

#[test]
fn bundled_sample_suite_plans_in_every_mode() {
    let suite = nmb_suite::sample::build();
    if suite.task_count() == 0 {
        println!("skipping: nmb_suite::sample::build() has no tasks yet");
        return;
    }
    for mode in InputMode::ALL {
        let options = PlanOptions {
            input_mode: *mode,
            ..PlanOptions::default()
        };
        let summary = PlanSummary::from_plan(plan(&suite, &options));
        assert!(summary.errors.is_empty(), "{mode}: {:?}", summary.errors);
        assert_eq!(summary.tasks, suite.task_count() as u64);
        assert!(summary.requests >= summary.tasks);
    }
}

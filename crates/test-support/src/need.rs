//! Skipping locally, failing under CI.

/// What a test does when something it needs is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Absent {
    /// Print why and pass (a local run).
    Skip,
    /// Fail the test (CI: a skipped check is not a passed one).
    Fail,
}

/// Whether `CI` (as CI services set it) asks for failures instead of skips: any value but empty, `0` or
/// `false`.
pub fn ci_value_is_set(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        let v = v.trim();
        !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false")
    })
}

/// Whether this process runs under CI.
pub fn under_ci() -> bool {
    ci_value_is_set(std::env::var("CI").ok().as_deref())
}

/// What to do about an absent requirement, given whether this is CI.
pub fn when_absent(ci: bool) -> Absent {
    if ci {
        Absent::Fail
    } else {
        Absent::Skip
    }
}

/// `found`, or — when it is `None` — a message naming `what` and `how` to get it, then `None` locally and a
/// panic under CI.
pub fn need<T>(what: &str, how: &str, found: Option<T>) -> Option<T> {
    if found.is_some() {
        return found;
    }
    match when_absent(under_ci()) {
        Absent::Fail => panic!("{what} is required under CI=true but absent; {how}"),
        Absent::Skip => {
            eprintln!("SKIPPED: {what} is absent ({how}); under CI=true this fails");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_fails_where_a_local_run_skips() {
        for v in ["true", "1", "yes", "TRUE"] {
            assert!(ci_value_is_set(Some(v)), "{v}");
        }
        for v in [None, Some(""), Some("0"), Some("false"), Some(" False ")] {
            assert!(!ci_value_is_set(v), "{v:?}");
        }
        assert_eq!(when_absent(true), Absent::Fail);
        assert_eq!(when_absent(false), Absent::Skip);
    }

    #[test]
    fn present_things_pass_through() {
        assert_eq!(need("x", "y", Some(3)), Some(3));
    }

    /// Run as a child by the test below: a check whose browser is absent.
    #[test]
    fn child_missing_a_browser() {
        if std::env::var_os("NMB_NEED_CHILD").is_none() {
            return;
        }
        assert!(need::<()>("a browser", "install it", None).is_none());
    }

    /// The same absent browser fails the check under CI=true and skips it otherwise, in a real test process.
    #[test]
    fn a_missing_browser_fails_under_ci_and_skips_locally() {
        let run = |ci: Option<&str>| {
            let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
            cmd.args([
                "need::tests::child_missing_a_browser",
                "--exact",
                "--nocapture",
            ])
            .env("NMB_NEED_CHILD", "1")
            .env_remove("CI");
            if let Some(v) = ci {
                cmd.env("CI", v);
            }
            cmd.output().unwrap()
        };
        let ci = run(Some("true"));
        assert!(!ci.status.success(), "under CI=true the check fails");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&ci.stdout),
            String::from_utf8_lossy(&ci.stderr)
        );
        assert!(said.contains("required under CI=true"), "{said}");
        let local = run(None);
        assert!(local.status.success(), "locally it skips");
        assert!(String::from_utf8_lossy(&local.stderr).contains("SKIPPED: a browser is absent"));
    }
}

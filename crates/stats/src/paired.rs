//! Bradley–Terry strengths from pairwise preferences, with Davidson's (1970) model of ties: each item has a
//! strength π = exp(θ), and with a tie parameter ν ≥ 0
//!
//! ```text
//! P(i beats j) = π_i / (π_i + π_j + ν √(π_i π_j))      P(tie) = ν √(π_i π_j) / (π_i + π_j + ν √(π_i π_j))
//! ```
//!
//! fitted by maximum likelihood (Newton's method with step halving). Without ties in the data ν is 0 and this is
//! the plain Bradley–Terry model. θ is returned centred (mean 0): only differences are identified.

use crate::StatsError;

/// One preference between items `a` and `b` (indices below the item count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    AWins,
    BWins,
    Tie,
}

/// A fitted model.
#[derive(Debug, Clone, PartialEq)]
pub struct Strengths {
    /// Log-strength of each item, centred to mean 0.
    pub theta: Vec<f64>,
    /// Davidson's tie parameter; 0 when the data have no tie.
    pub nu: f64,
    /// The maximised log-likelihood.
    pub log_likelihood: f64,
}

/// Fits the model to `votes` (a, b, preference) over `items` items.
pub fn bradley_terry(
    items: usize,
    votes: &[(usize, usize, Preference)],
) -> Result<Strengths, StatsError> {
    check(items, votes)?;
    let ties = votes.iter().any(|v| v.2 == Preference::Tie);
    // Parameters: θ_1..θ_{n-1} (θ_0 = 0), then λ = ln ν when the data have ties.
    let free = items - 1 + usize::from(ties);
    let mut p = vec![0.0; free];
    if ties {
        p[free - 1] = -1.0; // ν = e^-1 to start
    }
    let mut current = log_likelihood(votes, ties, &p).0;
    for _ in 0..200 {
        let (_, grad, hess) = log_likelihood(votes, ties, &p);
        let Some(step) = solve(
            hess.iter()
                .map(|r| r.iter().map(|v| -v).collect())
                .collect(),
            grad,
        ) else {
            return Err(undefined("the likelihood has no unique maximum"));
        };
        let largest = step.iter().fold(0.0f64, |m, s| m.max(s.abs()));
        // Near the maximum the likelihood is flat to rounding, so full Newton steps are taken and the step's size
        // says when to stop; far from it, the step is halved until the likelihood does not fall.
        if largest < 1e-2 {
            p.iter_mut().zip(&step).for_each(|(a, s)| *a += s);
            current = log_likelihood(votes, ties, &p).0;
            if largest < 1e-13 {
                return Ok(finish(items, ties, p, current));
            }
            continue;
        }
        let mut scale = 1.0;
        loop {
            let next: Vec<f64> = p.iter().zip(&step).map(|(a, s)| a + scale * s).collect();
            let value = log_likelihood(votes, ties, &next).0;
            if value >= current || scale < 1e-12 {
                (p, current) = (next, value);
                break;
            }
            scale /= 2.0;
        }
    }
    Err(undefined(
        "Newton's method did not converge (an item that always wins or always loses has no finite strength)",
    ))
}

fn finish(items: usize, ties: bool, p: Vec<f64>, log_likelihood: f64) -> Strengths {
    let mut theta = vec![0.0];
    theta.extend(&p[..items - 1]);
    let mean = theta.iter().sum::<f64>() / items as f64;
    theta.iter_mut().for_each(|t| *t -= mean);
    let nu = if ties { p[items - 1].exp() } else { 0.0 };
    Strengths {
        theta,
        nu,
        log_likelihood,
    }
}

/// The log-likelihood at `p` with its gradient and Hessian in the free parameters.
fn log_likelihood(
    votes: &[(usize, usize, Preference)],
    ties: bool,
    p: &[f64],
) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
    let n = p.len();
    let theta = |i: usize| if i == 0 { 0.0 } else { p[i - 1] };
    // Where θ_i sits among the free parameters (θ_0 is fixed).
    let slot = |i: usize| (i > 0).then(|| i - 1);
    let lambda = ties.then(|| n - 1);
    let nu = if ties { p[n - 1].exp() } else { 0.0 };
    let (mut value, mut grad, mut hess) = (0.0, vec![0.0; n], vec![vec![0.0; n]; n]);
    for &(a, b, pref) in votes {
        let u = (theta(a) - theta(b)) / 2.0;
        let f = 2.0 * u.cosh() + nu;
        let (win, tie) = match pref {
            Preference::AWins => (1.0, 0.0),
            Preference::BWins => (-1.0, 0.0),
            Preference::Tie => (0.0, 1.0),
        };
        // ν is 0 only without ties in the data, where no term needs ln ν.
        let tie_term = if tie > 0.0 { nu.ln() } else { 0.0 };
        value += win * u + tie_term - f.ln();
        let du = win - 2.0 * u.sinh() / f;
        let duu = -(2.0 * u.cosh() * f - 4.0 * u.sinh().powi(2)) / (f * f);
        // u moves with θ_a by 1/2 and with θ_b by -1/2.
        let sides = [(slot(a), 0.5), (slot(b), -0.5)];
        for &(i, si) in &sides {
            let Some(i) = i else { continue };
            grad[i] += si * du;
            for &(j, sj) in &sides {
                if let Some(j) = j {
                    hess[i][j] += si * sj * duu;
                }
            }
        }
        if let Some(l) = lambda {
            grad[l] += tie - nu / f;
            hess[l][l] += -nu * 2.0 * u.cosh() / (f * f);
            let dul = 2.0 * u.sinh() * nu / (f * f);
            for &(i, si) in &sides {
                if let Some(i) = i {
                    hess[i][l] += si * dul;
                    hess[l][i] += si * dul;
                }
            }
        }
    }
    (value, grad, hess)
}

/// Solves `m x = v` by Gaussian elimination with partial pivoting; `None` when `m` is singular.
fn solve(mut m: Vec<Vec<f64>>, mut v: Vec<f64>) -> Option<Vec<f64>> {
    let n = v.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&a, &b| m[a][col].abs().total_cmp(&m[b][col].abs()))?;
        if m[pivot][col].abs() < 1e-300 {
            return None;
        }
        m.swap(col, pivot);
        v.swap(col, pivot);
        let pivot_row = m[col].clone();
        for row in col + 1..n {
            let factor = m[row][col] / pivot_row[col];
            for (x, p) in m[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= factor * p;
            }
            v[row] -= factor * v[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let rest: f64 = (row + 1..n).map(|k| m[row][k] * x[k]).sum();
        x[row] = (v[row] - rest) / m[row][row];
    }
    Some(x)
}

fn undefined(why: &'static str) -> StatsError {
    StatsError::Undefined {
        what: "Bradley–Terry strengths",
        why,
    }
}

fn check(items: usize, votes: &[(usize, usize, Preference)]) -> Result<(), StatsError> {
    if items < 2 {
        return Err(StatsError::TooFew {
            what: "bradley_terry items",
            min: 2,
            got: items,
        });
    }
    if let Some((a, b, _)) = votes
        .iter()
        .find(|v| v.0 >= items || v.1 >= items || v.0 == v.1)
    {
        return Err(StatsError::Invalid {
            what: "bradley_terry votes",
            expected: format!("two different items below {items}, got {a} and {b}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Preference::*;

    #[test]
    fn two_items_recover_the_win_share() {
        // 3 wins of 4: P = π_a / (π_a + π_b) = 3/4, so θ_a - θ_b = ln 3.
        let votes = [(0, 1, AWins), (0, 1, AWins), (1, 0, BWins), (0, 1, BWins)];
        let s = bradley_terry(2, &votes).unwrap();
        assert!((s.theta[0] - s.theta[1] - 3f64.ln()).abs() < 1e-10, "{s:?}");
        assert_eq!(s.nu, 0.0);
        assert!(
            bradley_terry(2, &[(0, 1, AWins)]).is_err(),
            "a perfect record"
        );
        assert!(bradley_terry(2, &[(0, 0, AWins)]).is_err());
    }
}

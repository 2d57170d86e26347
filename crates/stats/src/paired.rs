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
    let fit = fit(items, votes, &[], 0)?;
    Ok(Strengths {
        theta: fit.theta,
        nu: fit.nu,
        log_likelihood: fit.log_likelihood,
    })
}

/// A fit with covariates: the strengths once the covariates' share of each vote is taken out.
#[derive(Debug, Clone, PartialEq)]
pub struct StyledStrengths {
    /// Log-strength of each item, centred to mean 0.
    pub theta: Vec<f64>,
    /// One coefficient per covariate, on the log-odds scale of the difference (A minus B).
    pub beta: Vec<f64>,
    /// Davidson's tie parameter; 0 when the data have no tie.
    pub nu: f64,
    pub log_likelihood: f64,
}

/// Bradley–Terry with Davidson's ties and covariates, as LMArena's style control: each vote `i` carries a
/// vector `covariates[i]` (the difference A minus B of, say, answer length), and the log-odds of A over B is
/// θ_a − θ_b + β·covariates\[i\]. So a model is not credited for what the covariates already explain. Every
/// row of `covariates` has the same length; an empty slice fits plain [`bradley_terry`].
pub fn bradley_terry_styled(
    items: usize,
    votes: &[(usize, usize, Preference)],
    covariates: &[Vec<f64>],
) -> Result<StyledStrengths, StatsError> {
    let width = covariates.first().map_or(0, Vec::len);
    if !covariates.is_empty() {
        crate::check_same_len(
            "bradley_terry_styled covariates",
            covariates.len(),
            votes.len(),
        )?;
    }
    if let Some(i) = covariates.iter().position(|c| c.len() != width) {
        return Err(StatsError::Invalid {
            what: "bradley_terry_styled covariates",
            expected: format!(
                "{width} values in every row, got {} in row {i}",
                covariates[i].len()
            ),
        });
    }
    for row in covariates {
        crate::check_finite("bradley_terry_styled covariates", row)?;
    }
    fit(items, votes, covariates, width)
}

fn fit(
    items: usize,
    votes: &[(usize, usize, Preference)],
    covariates: &[Vec<f64>],
    width: usize,
) -> Result<StyledStrengths, StatsError> {
    check(items, votes)?;
    let ties = votes.iter().any(|v| v.2 == Preference::Tie);
    let model = Model {
        items,
        width,
        ties,
        votes,
        covariates,
    };
    // Parameters: θ_1..θ_{n-1} (θ_0 = 0), β_1..β_k, then λ = ln ν when the data have ties.
    let free = items - 1 + width + usize::from(ties);
    let mut p = vec![0.0; free];
    if ties {
        p[free - 1] = -1.0; // ν = e^-1 to start
    }
    let mut current = model.log_likelihood(&p).0;
    for _ in 0..200 {
        let (_, grad, hess) = model.log_likelihood(&p);
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
            current = model.log_likelihood(&p).0;
            if largest < 1e-13 {
                return Ok(model.finish(p, current));
            }
            continue;
        }
        let mut scale = 1.0;
        loop {
            let next: Vec<f64> = p.iter().zip(&step).map(|(a, s)| a + scale * s).collect();
            let value = model.log_likelihood(&next).0;
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

struct Model<'a> {
    items: usize,
    width: usize,
    ties: bool,
    votes: &'a [(usize, usize, Preference)],
    covariates: &'a [Vec<f64>],
}

impl Model<'_> {
    fn finish(&self, p: Vec<f64>, log_likelihood: f64) -> StyledStrengths {
        let n = self.items;
        let mut theta = vec![0.0];
        theta.extend(&p[..n - 1]);
        let mean = theta.iter().sum::<f64>() / n as f64;
        theta.iter_mut().for_each(|t| *t -= mean);
        let beta = p[n - 1..n - 1 + self.width].to_vec();
        let nu = if self.ties { p[p.len() - 1].exp() } else { 0.0 };
        StyledStrengths {
            theta,
            beta,
            nu,
            log_likelihood,
        }
    }

    /// Where u = (log-odds of A over B) / 2 moves with each free parameter for vote `v`: θ_a by 1/2, θ_b by
    /// −1/2 (θ_0 is fixed) and β_j by half the covariate.
    fn sides(&self, v: usize) -> Vec<(usize, f64)> {
        let (a, b, _) = self.votes[v];
        let mut sides = Vec::with_capacity(2 + self.width);
        if a > 0 {
            sides.push((a - 1, 0.5));
        }
        if b > 0 {
            sides.push((b - 1, -0.5));
        }
        if let Some(row) = self.covariates.get(v) {
            let at = self.items - 1;
            sides.extend(row.iter().enumerate().map(|(j, x)| (at + j, x / 2.0)));
        }
        sides
    }

    /// The log-likelihood at `p` with its gradient and Hessian in the free parameters.
    fn log_likelihood(&self, p: &[f64]) -> (f64, Vec<f64>, Vec<Vec<f64>>) {
        let n = p.len();
        let lambda = self.ties.then(|| n - 1);
        let nu = if self.ties { p[n - 1].exp() } else { 0.0 };
        let (mut value, mut grad, mut hess) = (0.0, vec![0.0; n], vec![vec![0.0; n]; n]);
        for (v, &(_, _, pref)) in self.votes.iter().enumerate() {
            let sides = self.sides(v);
            let u: f64 = sides.iter().map(|&(i, c)| c * p[i]).sum();
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
            for &(i, si) in &sides {
                grad[i] += si * du;
                for &(j, sj) in &sides {
                    hess[i][j] += si * sj * duu;
                }
            }
            if let Some(l) = lambda {
                grad[l] += tie - nu / f;
                hess[l][l] += -nu * 2.0 * u.cosh() / (f * f);
                let dul = 2.0 * u.sinh() * nu / (f * f);
                for &(i, si) in &sides {
                    hess[i][l] += si * dul;
                    hess[l][i] += si * dul;
                }
            }
        }
        (value, grad, hess)
    }
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

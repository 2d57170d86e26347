//! What a study may spend: the cap's preconditions ([`check_cap`]), the dollars its runs have spent ([`spent`]),
//! what one cell may still send ([`Budget`]) and what each cell would send at most ([`CellEstimate`], the dry
//! run's rows). Dollars come from token counts and the run file's prices (dollars per million input and output
//! tokens, and cached input and cache writes where given); nothing here sends a request.

use std::path::PathBuf;

use nmb_results::cost::Price;
use nmb_store::{Store, StoreError};

use crate::{Cell, Study};

/// Why a study's budget cannot be worked out.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// A cap needs a price for every model.
    #[error("{path}: study.max_cost needs a price for every model; {model} has none (add price = [input, output])")]
    Unpriced { path: PathBuf, model: String },
    /// Judges have no price in the run file, so their calls cannot be counted against a cap.
    #[error(
        "{path}: study.max_cost cannot be kept with judges, which have no price in the run file; remove the judges \
         or the cap"
    )]
    Judges { path: PathBuf },
    /// A cell's suite cannot be planned.
    #[error("cell {index} ({name}): {source}")]
    Estimate {
        index: usize,
        name: String,
        #[source]
        source: Box<nmb_run::EvalError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The most `tokens_in` input and `tokens_out` output tokens can cost at `price`: every input token at the
/// dearest of the input rates, because what the provider's cache will read or write is not known beforehand, and
/// a cache write can cost more than plain input (Anthropic's: 1.25 times).
pub fn most_dollars(tokens_in: f64, tokens_out: f64, price: &Price) -> f64 {
    let input = [price.cached_input_per_mtok, price.cache_write_per_mtok]
        .into_iter()
        .flatten()
        .fold(price.input_per_mtok, f64::max);
    (tokens_in * input + tokens_out * price.output_per_mtok) / 1_000_000.0
}

/// A cap can be kept only where every call has a price: every model priced, and no judges (the run file gives
/// judges no price).
pub fn check_cap(study: &Study, cells: &[Cell]) -> Result<(), BudgetError> {
    if let Some(c) = cells.iter().find(|c| c.price.is_none()) {
        return Err(BudgetError::Unpriced {
            path: study.path.clone(),
            model: c.model.clone(),
        });
    }
    if !study.file.scoring.judges.is_empty() {
        return Err(BudgetError::Judges {
            path: study.path.clone(),
        });
    }
    Ok(())
}

/// Dollars spent by every run of the study in `store` (every invocation), from the tokens its calls used at its
/// cells' prices, cached input and cache writes at their own rates where given and batched calls at the batch
/// rate (as the report's cost split counts them). Answers taken from the store cost nothing; runs of unpriced models count nothing.
pub fn spent(store: &Store, study: &Study, cells: &[Cell]) -> Result<f64, BudgetError> {
    let mut total = 0.0;
    for run in store.list_runs()? {
        if run.manifest.study.as_deref() != Some(study.name()) {
            continue;
        }
        let price = cells
            .iter()
            .find(|c| c.config.model.identity() == run.manifest.model)
            .and_then(|c| c.price);
        if let Some(price) = price {
            let s = store.summary(&run.run_id)?;
            total += price.run_cost(&s).total;
        }
    }
    Ok(total)
}

/// What one cell may still spend under a cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Dollars the study's runs have spent so far (every invocation).
    pub spent: f64,
    /// The most one request of this cell can cost: its largest estimated prompt (earlier answers of a consult
    /// included at max_tokens each) and max_tokens out, at the model's price.
    pub per_request: f64,
    /// Requests that fit in what is left (`u64::MAX` when a request costs nothing).
    pub requests: u64,
}

impl Budget {
    /// The budget of `cell` under `cap` dollars when the study has spent `spent` (see [`spent`]). An unpriced
    /// cell costs nothing ([`check_cap`] refuses a cap with one).
    pub fn for_cell(cap: f64, cell: &Cell, spent: f64) -> Result<Budget, BudgetError> {
        let config = &cell.config;
        let plan = nmb_run::estimate(config).map_err(|source| BudgetError::Estimate {
            index: cell.index,
            name: cell.name.clone(),
            source: Box::new(source),
        })?;
        let max_tokens = config.params.max_tokens;
        let input = plan
            .tasks
            .iter()
            .map(|t| t.largest_prompt(max_tokens))
            .fold(0.0, f64::max);
        let per_request = cell
            .price
            .map_or(0.0, |p| most_dollars(input, f64::from(max_tokens), &p));
        Ok(Budget::new(cap, spent, per_request))
    }

    /// The budget left under `cap` after `spent`, at `per_request` dollars a request at most.
    pub fn new(cap: f64, spent: f64, per_request: f64) -> Budget {
        let left = (cap - spent).max(0.0);
        let requests = if per_request > 0.0 {
            (left / per_request).floor() as u64
        } else {
            u64::MAX
        };
        Budget {
            spent,
            per_request,
            requests,
        }
    }

    /// Why a cell that stopped at this budget stopped, for the study's state and its output.
    pub fn why(&self, cap: f64) -> String {
        format!(
            "the next requests could pass the cap of ${cap:.4}: ${:.4} spent, at most ${:.6} per request, {} request(s) \
             allowed",
            self.spent, self.per_request, self.requests
        )
    }
}

/// What one cell would send and the most it can cost (a row of the dry run); nothing is sent or stored.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CellEstimate {
    pub requests: u64,
    /// Estimated input tokens in all.
    pub est_input_tokens: u64,
    /// Output tokens at most (answers × max_tokens).
    pub max_output: u64,
    /// The most it can cost: estimated input and the most output at the model's price; `None` without a price.
    pub max_dollars: Option<f64>,
}

impl CellEstimate {
    /// Plans `cell`'s suite without sending anything.
    pub fn of(cell: &Cell) -> Result<CellEstimate, BudgetError> {
        let t = nmb_run::estimate(&cell.config).map_err(|source| BudgetError::Estimate {
            index: cell.index,
            name: cell.name.clone(),
            source: Box::new(source),
        })?;
        Ok(CellEstimate::from_counts(
            t.requests,
            t.total.est_input_tokens,
            t.max_output,
            cell.price,
        ))
    }

    /// A row from its counts and the model's price.
    pub fn from_counts(
        requests: u64,
        est_input_tokens: u64,
        max_output: u64,
        price: Option<Price>,
    ) -> CellEstimate {
        CellEstimate {
            requests,
            est_input_tokens,
            max_output,
            max_dollars: price
                .map(|p| most_dollars(est_input_tokens as f64, max_output as f64, &p)),
        }
    }
}

/// The dry run's totals over its rows.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub requests: u64,
    pub est_input_tokens: u64,
    pub max_output: u64,
    /// The most the priced cells can cost.
    pub max_dollars: f64,
    /// Cells without a price, not counted in `max_dollars`.
    pub unpriced: usize,
}

impl Totals {
    pub fn of(rows: &[CellEstimate]) -> Totals {
        let mut t = Totals::default();
        for r in rows {
            t.requests += r.requests;
            t.est_input_tokens += r.est_input_tokens;
            t.max_output += r.max_output;
            t.max_dollars += r.max_dollars.unwrap_or(0.0);
            t.unpriced += usize::from(r.max_dollars.is_none());
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn price(rates: &[f64]) -> Price {
        Price::from_rates(rates).unwrap()
    }

    #[test]
    fn the_most_is_every_input_token_at_the_dearest_input_rate() {
        let (tin, tout) = (1_500.0, 300.0);
        let plain = price(&[2.5, 10.0]);
        assert_eq!(
            most_dollars(tin, tout, &plain),
            (tin * 2.5 + tout * 10.0) / 1e6
        );
        assert_eq!(most_dollars(0.0, 0.0, &plain), 0.0);
        // Cheaper cached input does not lower the most; a dearer cache write raises it.
        assert_eq!(
            most_dollars(tin, tout, &price(&[2.5, 10.0, 0.25])),
            most_dollars(tin, tout, &plain)
        );
        assert_eq!(
            most_dollars(tin, tout, &price(&[3.0, 15.0, 0.3, 3.75])),
            (tin * 3.75 + tout * 15.0) / 1e6
        );
    }

    #[test]
    fn budget_fits_whole_requests_in_what_is_left() {
        let (cap, spent, per) = (1.0, 0.25, 0.1);
        let b = Budget::new(cap, spent, per);
        assert_eq!(b.requests, ((cap - spent) / per).floor() as u64);
        assert_eq!(b.spent, spent);
        assert_eq!(b.per_request, per);
        // Spent past the cap: nothing is left, not a negative amount.
        assert_eq!(Budget::new(cap, cap + 1.0, per).requests, 0);
        // Free requests are not limited.
        assert_eq!(Budget::new(cap, spent, 0.0).requests, u64::MAX);
    }

    #[test]
    fn why_names_the_cap_spending_and_requests() {
        let b = Budget::new(2.0, 0.5, 0.25);
        let why = b.why(2.0);
        assert!(why.contains("$2.0000"), "{why}");
        assert!(why.contains("$0.5000 spent"), "{why}");
        assert!(why.contains("$0.250000 per request"), "{why}");
        assert!(why.contains(&format!("{} request(s)", b.requests)), "{why}");
    }

    #[test]
    fn rows_and_totals_add_up() {
        let a = CellEstimate::from_counts(10, 4_000, 2_560, Some(price(&[1.0, 2.0])));
        let b = CellEstimate::from_counts(3, 900, 768, None);
        assert_eq!(a.max_dollars, Some((4_000.0 * 1.0 + 2_560.0 * 2.0) / 1e6));
        assert_eq!(b.max_dollars, None);
        let t = Totals::of(&[a, b]);
        assert_eq!(t.requests, 13);
        assert_eq!(t.est_input_tokens, 4_900);
        assert_eq!(t.max_output, 3_328);
        assert_eq!(t.max_dollars, a.max_dollars.unwrap());
        assert_eq!(t.unpriced, 1);
    }

    const PRICED: &str = r#"
[study]
name = "capped"

[[models]]
spec = "openai:a@http://127.0.0.1:1/v1"
price = [1.0, 2.0]
max_tokens = 100

[[suites]]
spec = "sample"
samples = 1
"#;

    fn study(text: &str) -> Study {
        crate::parse(std::path::Path::new("/s/s.toml"), text).unwrap()
    }

    #[test]
    fn a_cap_needs_every_price_and_no_judges() {
        let s = study(PRICED);
        assert!(check_cap(&s, &s.cells()).is_ok());
        let unpriced = study(&PRICED.replace("price = [1.0, 2.0]\n", ""));
        let e = check_cap(&unpriced, &unpriced.cells()).unwrap_err();
        assert!(matches!(e, BudgetError::Unpriced { .. }), "{e}");
        let judged = study(&format!(
            "{PRICED}\n[scoring]\njudges = [\"openai:j@http://127.0.0.1:1/v1\"]\n"
        ));
        let e = check_cap(&judged, &judged.cells()).unwrap_err();
        assert!(matches!(e, BudgetError::Judges { .. }), "{e}");
    }

    #[test]
    fn a_cells_budget_is_its_largest_request_at_its_price() {
        let s = study(PRICED);
        let cell = &s.cells()[0];
        let plan = nmb_run::estimate(&cell.config).unwrap();
        let largest = plan
            .tasks
            .iter()
            .map(|t| t.largest_prompt(100))
            .fold(0.0, f64::max);
        let per_request = (largest * 1.0 + 100.0 * 2.0) / 1e6;
        let (cap, spent) = (0.01, 0.004);
        let b = Budget::for_cell(cap, cell, spent).unwrap();
        assert_eq!(b.per_request, per_request);
        assert_eq!(b.requests, ((cap - spent) / per_request).floor() as u64);
        let row = CellEstimate::of(cell).unwrap();
        assert_eq!(row.requests, plan.requests);
        assert_eq!(
            row.max_dollars,
            Some((plan.total.est_input_tokens as f64 * 1.0 + plan.max_output as f64 * 2.0) / 1e6)
        );
    }

    #[test]
    fn spent_counts_only_the_studys_priced_runs() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_dir(dir.path()).unwrap();
        let s = study(PRICED);
        assert_eq!(spent(&store, &s, &s.cells()).unwrap(), 0.0);
    }
}

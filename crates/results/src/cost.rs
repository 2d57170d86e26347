//! What answers cost: dollar prices per million tokens, as `--price MODEL=IN,OUT[,CACHED[,WRITE]]` and a run
//! file's `price = [in, out, cached, write]` give them ([`Price::from_rates`] for both), and which price a
//! model's spec takes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Dollars per million tokens. Input read from the provider's cache and input written to it have rates of
/// their own where given (absent: the input rate); reasoning tokens are output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

/// The highest rate a price may give, in dollars per million tokens ($1 a token, thousands of times any
/// provider's list price), so that every cost nmb computes from stored token counts stays a finite number.
pub const MAX_RATE: f64 = 1_000_000.0;

/// The share of the listed rates a call answered through a batch API pays: OpenAI ("50% lower costs"),
/// Anthropic ("50% of standard API prices") and Gemini ("50% of the standard cost") all bill batches at half.
pub const BATCH_RATE: f64 = 0.5;

/// Where a run's dollars went: every token counted once, under the rate it is billed at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CostSplit {
    /// Input neither read from nor written to the cache.
    pub input: f64,
    pub cached_input: f64,
    pub cache_write: f64,
    /// Output apart from the reasoning.
    pub output: f64,
    pub reasoning: f64,
    pub total: f64,
}

/// A run's token counts as the APIs reported them: `cached_in` and `cache_write` are part of `input`,
/// `reasoning` part of `output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub reasoning: u64,
    pub cached_in: u64,
    pub cache_write: u64,
}

impl From<&nmb_store::BatchUsage> for Tokens {
    /// The counts of a run's calls answered in batches.
    fn from(b: &nmb_store::BatchUsage) -> Tokens {
        Tokens {
            input: b.tokens_in,
            output: b.tokens_out,
            reasoning: b.tokens_reasoning,
            cached_in: b.tokens_cached_in,
            cache_write: b.tokens_cache_write,
        }
    }
}

impl From<&nmb_store::RunSummary> for Tokens {
    /// The counts a run's calls reported, summed.
    fn from(s: &nmb_store::RunSummary) -> Tokens {
        Tokens {
            input: s.tokens_in,
            output: s.tokens_out,
            reasoning: s.tokens_reasoning,
            cached_in: s.tokens_cached_in,
            cache_write: s.tokens_cache_write,
        }
    }
}

impl Price {
    /// A price from its rates in the order `--price` and a run file's `price` give them: input and output, then
    /// optionally cached input and cache writes, each a number of dollars per million tokens from 0 to
    /// [`MAX_RATE`].
    pub fn from_rates(rates: &[f64]) -> Result<Price, String> {
        let [input, output, rest @ ..] = rates else {
            return Err(format!(
                "expected at least the input and output rates, got {} rate(s)",
                rates.len()
            ));
        };
        if rest.len() > 2 {
            return Err(format!(
                "at most four rates (input, output, cached input, cache write), got {}",
                rates.len()
            ));
        }
        let names = ["input", "output", "cached input", "cache write"];
        if let Some((v, what)) = rates
            .iter()
            .zip(names)
            .find(|(v, _)| !(v.is_finite() && **v >= 0.0 && **v <= MAX_RATE))
        {
            let v = if v.abs() >= 1e15 {
                format!("{v:e}")
            } else {
                v.to_string()
            };
            return Err(format!(
                "the {what} rate {v} is not a number of dollars per million tokens from 0 to at most {MAX_RATE}"
            ));
        }
        Ok(Price {
            input_per_mtok: *input,
            output_per_mtok: *output,
            cached_input_per_mtok: rest.first().copied(),
            cache_write_per_mtok: rest.get(1).copied(),
        })
    }

    /// Dollars for these tokens.
    pub fn dollars(&self, tokens_in: f64, tokens_out: f64) -> f64 {
        (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000.0
    }

    /// The dollars a run's calls cost, those answered in batches at the batch rate.
    pub fn run_cost(&self, s: &nmb_store::RunSummary) -> CostSplit {
        self.split_batched(&Tokens::from(s), &Tokens::from(&s.batch))
    }

    /// The dollars of `all`, of which `batched` were sent through a provider's batch API and are billed at
    /// [`BATCH_RATE`] of the listed rates.
    pub fn split_batched(&self, all: &Tokens, batched: &Tokens) -> CostSplit {
        let full = self.split(all);
        let saved = self.split(batched);
        let off = 1.0 - BATCH_RATE;
        CostSplit {
            input: full.input - off * saved.input,
            cached_input: full.cached_input - off * saved.cached_input,
            cache_write: full.cache_write - off * saved.cache_write,
            output: full.output - off * saved.output,
            reasoning: full.reasoning - off * saved.reasoning,
            total: full.total - off * saved.total,
        }
    }

    /// The dollars of `t`, split by what they paid for.
    pub fn split(&self, t: &Tokens) -> CostSplit {
        let per = |n: u64, rate: f64| n as f64 * rate / 1_000_000.0;
        let cached = t.cached_in.min(t.input);
        let write = t.cache_write.min(t.input - cached);
        let reasoning = t.reasoning.min(t.output);
        let split = CostSplit {
            input: per(t.input - cached - write, self.input_per_mtok),
            cached_input: per(
                cached,
                self.cached_input_per_mtok.unwrap_or(self.input_per_mtok),
            ),
            cache_write: per(
                write,
                self.cache_write_per_mtok.unwrap_or(self.input_per_mtok),
            ),
            output: per(t.output - reasoning, self.output_per_mtok),
            reasoning: per(reasoning, self.output_per_mtok),
            total: 0.0,
        };
        CostSplit {
            total: split.input
                + split.cached_input
                + split.cache_write
                + split.output
                + split.reasoning,
            ..split
        }
    }
}

/// Prices by model: the key is a full spec (`openai:gpt-4o@URL`), a spec without URL, a bare model name, or
/// `*` for every other model. The most specific key wins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prices(pub BTreeMap<String, Price>);

impl Prices {
    /// Parses `MODEL=IN,OUT[,CACHED[,WRITE]]` (dollars per million input and output tokens, and optionally
    /// per million input tokens read from the provider's cache and written to it).
    pub fn add_spec(&mut self, spec: &str) -> Result<(), String> {
        let (model, prices) = spec.rsplit_once('=').ok_or_else(|| {
            format!("price {spec:?}: expected MODEL=IN,OUT[,CACHED[,WRITE]] (dollars per million tokens)")
        })?;
        let pieces: Vec<&str> = prices.split(',').collect();
        if pieces.len() < 2 {
            return Err(format!(
                "price {spec:?}: expected IN,OUT after '=', e.g. gpt-4o=2.5,10"
            ));
        }
        let rates = pieces
            .iter()
            .map(|s| {
                s.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("price {spec:?}: {s:?} is not a number"))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        let price = Price::from_rates(&rates).map_err(|e| format!("price {spec:?}: {e}"))?;
        if model.trim().is_empty() {
            return Err(format!(
                "price {spec:?}: the model before '=' is empty (use * for every model)"
            ));
        }
        self.0.insert(model.trim().to_string(), price);
        Ok(())
    }

    /// Parses every spec.
    pub fn from_specs<S: AsRef<str>>(specs: &[S]) -> Result<Prices, String> {
        let mut prices = Prices::default();
        for s in specs {
            prices.add_spec(s.as_ref())?;
        }
        Ok(prices)
    }

    /// The price of the model `spec` (`BACKEND:MODEL[@BASE_URL]`): by the full spec, then without the URL, then
    /// the bare model name, then `*`.
    pub fn for_model(&self, spec: &str) -> Option<Price> {
        let no_url = spec.split('@').next().unwrap_or(spec);
        let name = no_url.split_once(':').map_or(no_url, |(_, n)| n);
        [spec, no_url, name, "*"]
            .iter()
            .find_map(|k| self.0.get(*k).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_specific_price_wins() {
        let p =
            Prices::from_specs(&["*=1,1", "gpt-4o=2.5,10", "openai:gpt-4o@http://x=3,3"]).unwrap();
        assert_eq!(
            p.for_model("openai:gpt-4o@http://x")
                .unwrap()
                .input_per_mtok,
            3.0
        );
        assert_eq!(
            p.for_model("openai:gpt-4o@http://y")
                .unwrap()
                .input_per_mtok,
            2.5
        );
        assert_eq!(p.for_model("gemini:flash").unwrap().input_per_mtok, 1.0);
        assert!((p.for_model("gpt-4o").unwrap().dollars(1e6, 1e5) - 3.5).abs() < 1e-12);
        assert!(Prices::from_specs(&["gpt=1"]).is_err());
        assert!(Prices::from_specs(&["=1,2"]).is_err());
        assert!(Prices::from_specs(&["m=-1,2"]).is_err());
        assert!(Prices::from_specs(&["m=1,2,3,4,5"]).is_err());
        assert!(Prices::from_specs(&["m=1,2,x"]).is_err());
        assert!(Prices::from_specs(&["m=1,2,inf"]).is_err());
    }

    #[test]
    fn rates_give_a_price_in_the_order_written() {
        let p = Price::from_rates(&[3.0, 15.0, 0.3, 3.75]).unwrap();
        assert_eq!(p.cached_input_per_mtok, Some(0.3));
        assert_eq!(p.cache_write_per_mtok, Some(3.75));
        let p = Price::from_rates(&[3.0, 15.0, 0.3]).unwrap();
        assert_eq!(p.cached_input_per_mtok, Some(0.3));
        assert_eq!(p.cache_write_per_mtok, None);
        assert_eq!(
            Price::from_rates(&[3.0, 15.0])
                .unwrap()
                .cached_input_per_mtok,
            None
        );
        for (bad, why) in [
            (vec![3.0], "at least the input and output"),
            (vec![1.0, 2.0, 3.0, 4.0, 5.0], "at most four"),
            (vec![1.0, 2.0, -0.5], "the cached input rate -0.5"),
            (vec![1.0, 2.0, 3.0, f64::NAN], "the cache write rate NaN"),
            (vec![f64::INFINITY, 2.0], "the input rate inf"),
        ] {
            let e = Price::from_rates(&bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn batched_tokens_cost_half() {
        let price = Prices::from_specs(&["m=3,15,0.3,3.75"])
            .unwrap()
            .for_model("m")
            .unwrap();
        let all = Tokens {
            input: 1_000_000,
            output: 400_000,
            reasoning: 100_000,
            cached_in: 200_000,
            cache_write: 0,
        };
        let half = Tokens {
            input: 500_000,
            output: 200_000,
            reasoning: 50_000,
            cached_in: 100_000,
            cache_write: 0,
        };
        let s = price.split_batched(&all, &half);
        assert!(
            (s.total - 0.75 * price.split(&all).total).abs() < 1e-12,
            "{s:?}"
        );
        assert_eq!(
            price.split_batched(&all, &Tokens::default()),
            price.split(&all)
        );
    }

    #[test]
    fn a_split_counts_every_token_once_at_its_rate() {
        let p = Prices::from_specs(&["m=3,15,0.3,3.75"]).unwrap();
        let price = p.for_model("m").unwrap();
        let t = Tokens {
            input: 1_000_000,
            output: 400_000,
            reasoning: 300_000,
            cached_in: 600_000,
            cache_write: 100_000,
        };
        let s = price.split(&t);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(s.input, 0.3 * 3.0), "{s:?}");
        assert!(close(s.cached_input, 0.6 * 0.3), "{s:?}");
        assert!(close(s.cache_write, 0.1 * 3.75), "{s:?}");
        assert!(close(s.output, 0.1 * 15.0), "{s:?}");
        assert!(close(s.reasoning, 0.3 * 15.0), "{s:?}");
        assert!(close(
            s.total,
            s.input + s.cached_input + s.cache_write + s.output + s.reasoning
        ));
        // Without cache rates the cached tokens cost what input costs: the total is the plain price.
        let plain = Prices::from_specs(&["m=3,15"])
            .unwrap()
            .for_model("m")
            .unwrap();
        assert!(close(plain.split(&t).total, plain.dollars(1e6, 4e5)));
    }
}

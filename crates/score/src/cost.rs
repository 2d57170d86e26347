//! What answers cost: dollar prices per million tokens, as `--price MODEL=IN,OUT` gives them, and which price a
//! model's spec takes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    /// Dollars for these tokens.
    pub fn dollars(&self, tokens_in: f64, tokens_out: f64) -> f64 {
        (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1_000_000.0
    }
}

/// Prices by model: the key is a full spec (`openai:gpt-4o@URL`), a spec without URL, a bare model name, or
/// `*` for every other model. The most specific key wins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Prices(pub BTreeMap<String, Price>);

impl Prices {
    /// Parses `MODEL=IN,OUT` (dollars per million input and output tokens).
    pub fn add_spec(&mut self, spec: &str) -> Result<(), String> {
        let (model, prices) = spec.rsplit_once('=').ok_or_else(|| {
            format!("price {spec:?}: expected MODEL=IN,OUT (dollars per million tokens)")
        })?;
        let (input, output) = prices.split_once(',').ok_or_else(|| {
            format!("price {spec:?}: expected IN,OUT after '=', e.g. gpt-4o=2.5,10")
        })?;
        let number = |s: &str, what: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    format!("price {spec:?}: {what} price {s:?} is not a non-negative number")
                })
        };
        let price = Price {
            input_per_mtok: number(input, "input")?,
            output_per_mtok: number(output, "output")?,
        };
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
    }
}

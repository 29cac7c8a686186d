//! The read side's settings: what it holds in memory and how it ranks.
//!
//! The weights are data, not code: the daemon reads them from `[search.weights]`, checked by the
//! same load as every other setting, and `memsift eval retrieval --weights` tries others against
//! annotated conversations without a rebuild.

use serde::{Deserialize, Serialize};

use super::error::{ConfigError, invalid};

/// Read-side settings.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Megabytes the per-user search indexes (memory and turn vectors, memory and turn lexicons)
    /// may hold together; the least recently searched users' are dropped first.
    pub held_mb: u64,
    /// How the ranked lists are weighed.
    pub weights: SearchWeights,
}

/// How much each ranked list and each step after fusion counts (`[search.weights]`); the defaults
/// are what `memsift eval retrieval` measured best on annotated conversations (BENCHMARKS.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchWeights {
    /// The `k` of reciprocal rank fusion: larger flattens the difference between ranks.
    pub rrf_k: f64,
    /// Per signal.
    pub vector: f64,
    /// Per signal.
    pub lexical: f64,
    /// Per signal.
    pub evidence: f64,
    /// Per signal.
    pub evidence_vector: f64,
    /// Per signal.
    pub entity: f64,
    /// Per signal.
    pub date: f64,
    /// Per signal.
    pub turns: f64,
    /// Per signal.
    pub turn_vector: f64,
    /// A memory's importance (0–1) scales its fused score by `1 + importance_prior × (importance − 0.5)`.
    pub importance_prior: f64,
    /// A linked memory's score is its parent's × this × the link type's weight × the link's
    /// confidence × inherited importance.
    pub link_factor: f64,
    /// Links below this confidence are not followed.
    pub link_confidence_floor: f64,
    /// How many of the top memories have their links followed.
    pub link_parents: usize,
    /// Above 0, the query is embedded without the words that name the user's speakers (who a
    /// result is about is `speaker_focus`'s to judge).
    pub vector_without_names: f64,
    /// When the query names some of the people who speak in the user's conversations, a result
    /// none of them said has its score multiplied by this (1 turns it off).
    pub speaker_focus: f64,
    /// When the query names a time, a result from then (it happens then, or its evidence was said
    /// then) has its score multiplied by `1 + date_boost` (0 turns it off).
    pub date_boost: f64,
    /// What was said within `nearby_span` places of one of the best results' turns (the memory
    /// citing that turn, or the turn) gains the result's score × this (0 turns it off).
    pub nearby_factor: f64,
    /// How many of the best results have what was said next to them read.
    pub nearby_parents: usize,
    /// How many places either side of a result's turn are read (at most [`MAX_NEARBY_SPAN`]).
    pub nearby_span: i64,
    /// What another speaker said there gains `nearby_other_speaker` × that instead.
    pub nearby_other_speaker: f64,
}

/// The widest `nearby_span` read: each place is a turn per parent result to read and rank.
pub const MAX_NEARBY_SPAN: i64 = 8;

impl Default for SearchWeights {
    fn default() -> Self {
        SearchWeights {
            rrf_k: 5.0,
            vector: 1.3,
            lexical: 1.0,
            evidence: 1.0,
            evidence_vector: 1.0,
            entity: 0.3,
            date: 1.0,
            turns: 2.0,
            turn_vector: 1.0,
            importance_prior: 0.2,
            link_factor: 0.5,
            link_confidence_floor: 0.6,
            link_parents: 10,
            vector_without_names: 1.0,
            speaker_focus: 0.5,
            date_boost: 1.0,
            nearby_factor: 0.3,
            nearby_parents: 10,
            nearby_span: 2,
            nearby_other_speaker: 0.5,
        }
    }
}

impl SearchWeights {
    /// These weights with some replaced, from `name=value,…` (the field names above).
    pub fn with_overrides(&self, list: &str) -> Result<SearchWeights, String> {
        let mut fields = serde_json::to_value(self).map_err(|error| error.to_string())?;
        for pair in list.split(',').map(str::trim).filter(|pair| !pair.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("`{pair}` is not name=value"))?;
            let number: f64 = value
                .trim()
                .parse()
                .map_err(|_| format!("`{value}` (for {name}) is not a number"))?;
            let slot = fields
                .get_mut(name.trim())
                .ok_or_else(|| format!("no weight named `{name}`"))?;
            *slot = if slot.is_u64() {
                serde_json::json!(number as u64)
            } else {
                serde_json::json!(number)
            };
        }
        serde_json::from_value(fields).map_err(|error| error.to_string())
    }
}

impl SearchWeights {
    /// Each weight within its range, or the one line that names it and the fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let key = |name: &str| format!("search.weights.{name}");
        let share = [
            ("vector", self.vector),
            ("lexical", self.lexical),
            ("evidence", self.evidence),
            ("evidence_vector", self.evidence_vector),
            ("entity", self.entity),
            ("date", self.date),
            ("turns", self.turns),
            ("turn_vector", self.turn_vector),
            ("importance_prior", self.importance_prior),
            ("link_factor", self.link_factor),
            ("vector_without_names", self.vector_without_names),
            ("date_boost", self.date_boost),
            ("nearby_factor", self.nearby_factor),
        ];
        for (name, value) in share {
            if !(0.0..=100.0).contains(&value) {
                return Err(invalid(&key(name), value, "use a weight from 0 (off) to 100"));
            }
        }
        let fractions = [
            ("link_confidence_floor", self.link_confidence_floor, 0.0),
            ("speaker_focus", self.speaker_focus, f64::MIN_POSITIVE),
            ("nearby_other_speaker", self.nearby_other_speaker, 0.0),
        ];
        for (name, value, least) in fractions {
            if !(least..=1.0).contains(&value) {
                return Err(invalid(
                    &key(name),
                    value,
                    "use a factor in [0, 1] (speaker_focus above 0; 1 turns it off)",
                ));
            }
        }
        if !(0.5..=1000.0).contains(&self.rrf_k) {
            return Err(invalid(&key("rrf_k"), self.rrf_k, "use 0.5 to 1000 (default 5)"));
        }
        for (name, value) in [
            ("link_parents", self.link_parents),
            ("nearby_parents", self.nearby_parents),
        ] {
            if value > 100 {
                return Err(invalid(&key(name), value, "use 0 to 100 results (default 10)"));
            }
        }
        if !(0..=MAX_NEARBY_SPAN).contains(&self.nearby_span) {
            return Err(invalid(
                &key("nearby_span"),
                self.nearby_span,
                "use 0 to 8 places (default 2)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn the_shipped_weights_are_the_measured_defaults() {
        assert_eq!(Config::defaults().search.weights, SearchWeights::default());
    }

    #[test]
    fn overrides_replace_the_named_weights_and_refuse_unknown_names_and_non_numbers() {
        let weights = SearchWeights::default()
            .with_overrides("rrf_k=10, vector=2,link_parents=3")
            .unwrap();
        assert_eq!((weights.rrf_k, weights.vector, weights.link_parents), (10.0, 2.0, 3));
        assert_eq!(weights.lexical, SearchWeights::default().lexical);
        assert!(
            SearchWeights::default()
                .with_overrides("vectr=1")
                .unwrap_err()
                .contains("vectr")
        );
        assert!(SearchWeights::default().with_overrides("vector=x").is_err());
    }

    #[test]
    fn a_weight_out_of_range_is_refused_in_one_line_naming_it() {
        for (overlay, key) in [
            ("[search.weights]\nvector = -1.0\n", "search.weights.vector"),
            ("[search.weights]\nrrf_k = 0.0\n", "search.weights.rrf_k"),
            (
                "[search.weights]\nspeaker_focus = 0.0\n",
                "search.weights.speaker_focus",
            ),
            ("[search.weights]\nnearby_span = 9\n", "search.weights.nearby_span"),
            ("[search.weights]\nlexical = nan\n", "search.weights.lexical"),
            ("[search]\nheld_mb = 0\n", "search.held_mb"),
        ] {
            let error = Config::from_layers(Some(("test", overlay))).unwrap_err().to_string();
            assert!(error.contains(key) && !error.contains('\n'), "{overlay}: {error}");
        }
    }
}

//! Evidence recall, LoCoMo's own definition: for each question, the share of its evidence turns
//! cited by the top k results (a memory cites its evidence turns; a turn cites itself), averaged
//! over the questions. No model judges anything.

use std::collections::BTreeSet;

use serde::Serialize;

/// The cut-offs every row reports.
pub const KS: [usize; 3] = [1, 5, 10];
/// The token budgets every fused row reports.
pub const BUDGETS: [usize; 2] = [1000, 2000];

/// The share of `evidence` cited by the first `k` results.
pub fn recall_at(evidence: &BTreeSet<String>, cited: &[BTreeSet<String>], k: usize) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let found: BTreeSet<&String> = cited
        .iter()
        .take(k)
        .flatten()
        .filter(|label| evidence.contains(*label))
        .collect();
    found.len() as f64 / evidence.len() as f64
}

/// One configuration's figures over every question.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Row {
    /// Which signals ranked.
    pub name: String,
    /// Questions asked.
    pub n_questions: usize,
    /// Mean recall at k = 1, 5, 10.
    pub recall: [f64; 3],
    /// Questions whose every evidence turn is cited within k = 1, 5, 10.
    pub fully_covered: [usize; 3],
    /// Mean recall of the results packed into 1,000 and 2,000 tokens (fused rows only).
    pub recall_within_tokens: Option<[f64; 2]>,
    /// Search latency, 50th and 95th percentile, in milliseconds (query embedding included).
    pub latency_ms: [f64; 2],
}

/// Accumulates one configuration's questions.
#[derive(Debug, Default)]
pub struct Tally {
    n: usize,
    recall_sum: [f64; 3],
    full: [usize; 3],
    budget_sum: [f64; 2],
    n_budget: usize,
    latencies_ms: Vec<f64>,
}

impl Tally {
    /// Adds one question's top results (as the labels each cites) and how long the search took.
    pub fn add(&mut self, evidence: &BTreeSet<String>, cited: &[BTreeSet<String>], millis: f64) {
        self.n += 1;
        for (slot, k) in KS.iter().enumerate() {
            let recall = recall_at(evidence, cited, *k);
            self.recall_sum[slot] += recall;
            if recall >= 1.0 {
                self.full[slot] += 1;
            }
        }
        self.latencies_ms.push(millis);
    }

    /// Adds one question's results packed into each of [`BUDGETS`].
    pub fn add_budgeted(&mut self, evidence: &BTreeSet<String>, packed: [&[BTreeSet<String>]; 2]) {
        self.n_budget += 1;
        for (slot, cited) in packed.iter().enumerate() {
            self.budget_sum[slot] += recall_at(evidence, cited, usize::MAX);
        }
    }

    /// The row.
    pub fn row(mut self, name: &str) -> Row {
        let n = self.n.max(1) as f64;
        self.latencies_ms.sort_by(f64::total_cmp);
        Row {
            name: name.to_owned(),
            n_questions: self.n,
            recall: self.recall_sum.map(|sum| sum / n),
            fully_covered: self.full,
            recall_within_tokens: (self.n_budget > 0).then(|| self.budget_sum.map(|sum| sum / self.n_budget as f64)),
            latency_ms: [
                percentile(&self.latencies_ms, 0.50),
                percentile(&self.latencies_ms, 0.95),
            ],
        }
    }
}

/// The nearest-rank percentile of sorted values (0 when there are none).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(labels: &[&str]) -> BTreeSet<String> {
        labels.iter().map(|label| (*label).to_owned()).collect()
    }

    #[test]
    fn recall_counts_each_evidence_turn_once_within_k() {
        let evidence = set(&["D1:3", "D1:5"]);
        let cited = vec![set(&["D9:1"]), set(&["D1:3", "D1:4"]), set(&["D1:3"]), set(&["D1:5"])];
        assert_eq!(recall_at(&evidence, &cited, 1), 0.0);
        assert_eq!(recall_at(&evidence, &cited, 3), 0.5);
        assert_eq!(recall_at(&evidence, &cited, 4), 1.0);
        assert_eq!(recall_at(&set(&[]), &cited, 4), 0.0);
    }

    #[test]
    fn a_tally_averages_recall_counts_full_coverage_and_takes_percentiles() {
        let mut tally = Tally::default();
        tally.add(&set(&["a"]), &[set(&["a"])], 2.0);
        tally.add(&set(&["a", "b"]), &[set(&["x"]), set(&["a"])], 4.0);
        let row = tally.row("fusion");
        assert_eq!(row.n_questions, 2);
        assert_eq!(row.recall, [0.5, 0.75, 0.75]);
        assert_eq!(row.fully_covered, [1, 1, 1]);
        assert_eq!(row.latency_ms, [2.0, 4.0]);
        assert_eq!(row.recall_within_tokens, None);
    }
}

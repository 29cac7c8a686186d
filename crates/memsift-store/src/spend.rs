//! What requests cost and produce, as budgets read it: a user's spend today (settled and
//! reserved) and the output of recent answers that output allowances are learned from.

use chrono::{DateTime, Utc};
use memsift_core::UserId;
use memsift_core::status::Purpose;
use serde::Serialize;

use crate::Result;
use crate::handles::Requests;
use crate::tx::sql;

/// What a user's requests hold against their daily budget (USD).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spend {
    /// The real cost of requests answered or ended.
    pub settled_usd: f64,
    /// The estimates of requests planned or in flight.
    pub reserved_usd: f64,
}

impl Spend {
    /// Both together: what the budget has left to give is the budget minus this.
    pub fn total(&self) -> f64 {
        self.settled_usd + self.reserved_usd
    }
}

/// One recent answer's output, as the learned output allowance reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecentOutput {
    /// Output tokens billed.
    pub output_tokens: u64,
    /// It stopped at its `max_tokens`: the answer wanted more than it was allowed.
    pub hit_limit: bool,
}

impl Requests<'_> {
    /// What a user's requests created since `since` hold against their budget, every stage and
    /// lane: the real cost of those answered or ended, the reservation of those still planned or
    /// in flight (whose cost is not known yet).
    pub async fn user_spend_since(self, user_id: UserId, since: DateTime<Utc>) -> Result<Spend> {
        let (settled, reserved): (Option<f64>, Option<f64>) = self.read_one(sql!("SELECT CAST(SUM(CASE WHEN status IN ('planned', 'submitted') THEN 0 ELSE cost_usd END) AS DOUBLE PRECISION),
                        CAST(SUM(CASE WHEN status IN ('planned', 'submitted') THEN reserved_usd ELSE 0 END) AS DOUBLE PRECISION)
                 FROM llm_requests WHERE user_id = $1 AND created_at >= $2", user_id, since)).await?;
        Ok(Spend {
            settled_usd: settled.unwrap_or(0.0),
            reserved_usd: reserved.unwrap_or(0.0),
        })
    }

    /// The newest `limit` answers of `purpose` from `model` on a provider lane, newest first: what
    /// the output allowance of the next such request is learned from.
    pub async fn recent_outputs(self, purpose: Purpose, model: &str, limit: i64) -> Result<Vec<RecentOutput>> {
        let rows: Vec<(i64, Option<String>)> = self
            .read_all(sql!(
                "SELECT output_tokens, stop_reason FROM llm_requests
                 WHERE purpose = $1 AND model = $2 AND completed_at IS NOT NULL
                   AND lane <> 'heuristic' AND output_tokens > 0
                 ORDER BY completed_at DESC LIMIT $3",
                purpose.as_str(),
                model,
                limit
            ))
            .await?;
        Ok(rows
            .into_iter()
            .map(|(output_tokens, stop_reason)| RecentOutput {
                output_tokens: u64::try_from(output_tokens).unwrap_or(0),
                hit_limit: matches!(stop_reason.as_deref(), Some("max_tokens" | "length")),
            })
            .collect())
    }
}

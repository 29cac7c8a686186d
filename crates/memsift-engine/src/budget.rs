//! Daily spend budgets per tier: what a request is expected to cost, whether a user's planned
//! requests still fit, and the key recorded on requests the budget policy sent to the offline
//! lane instead.
//!
//! A request reserves its estimate when it is planned (`llm_requests.reserved_usd`) and is
//! settled at its real `cost_usd` once answered; what a user holds against today's budget is the
//! real cost of today's answered or ended requests plus the reservations of those still planned or
//! in flight. So every request planned in one step is counted before the next is planned, and a
//! step can never spend past the budget (the estimate prices every output token `max_tokens`
//! allows, so an answer costs at most its reservation).

use std::cell::RefCell;
use std::collections::HashMap;

use memsift_core::UserId;
use memsift_core::config::{Config, ProviderKind, price_for};
use memsift_core::status::Lane;
use memsift_llm::ResolvedLlm;
use memsift_llm::usage::{TokenUsage, cost};

use crate::app::App;

/// The most a request on `lane` through `llm` can cost: its counted input tokens, uncached, plus
/// `max_tokens` of output, at `[prices]`, with the batch discount on the batch lane. The offline
/// lane and a model without a price cost nothing (the latter is warned about where it is priced).
pub fn estimate_usd(config: &Config, llm: &ResolvedLlm, lane: Lane, input_tokens: u64) -> f64 {
    if lane == Lane::Heuristic || llm.provider == ProviderKind::Heuristic {
        return 0.0;
    }
    let Some(price) = price_for(&config.prices, &llm.model) else {
        return 0.0;
    };
    let usage = TokenUsage {
        input_tokens,
        output_tokens: u64::from(llm.max_tokens),
        ..TokenUsage::default()
    };
    cost(&usage, price, lane == Lane::Batch)
}

/// Estimates granted by a planning pass whose requests are written together at its end, by user:
/// the store cannot count them yet, so the pass counts them itself.
#[derive(Debug, Default)]
pub(crate) struct Pending(RefCell<HashMap<UserId, f64>>);

impl Pending {
    fn of(&self, user_id: UserId) -> f64 {
        self.0.borrow().get(&user_id).copied().unwrap_or(0.0)
    }

    fn add(&self, user_id: UserId, usd: f64) {
        *self.0.borrow_mut().entry(user_id).or_default() += usd;
    }
}

/// Reserves `estimate_usd` for `user_id` when it fits in their tier's daily budget beside what
/// they already hold today (and `pending`, this pass's grants not yet written), and returns `None`;
/// otherwise returns `Some(why)` and reserves nothing. The offline lane costs nothing, so it
/// always fits.
pub(crate) async fn within_budget(
    app: &App,
    user_id: UserId,
    tier: &str,
    lane: Lane,
    estimate_usd: f64,
    pending: &Pending,
) -> anyhow::Result<Option<String>> {
    let Some(&budget) = app.config.billing.daily_budget_usd.get(tier) else {
        return Ok(None);
    };
    if lane == Lane::Heuristic {
        return Ok(None);
    }
    let day_start = app
        .clock
        .now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .expect("midnight exists")
        .and_utc();
    let spend = app.store.requests().user_spend_since(user_id, day_start).await?;
    let reserved = spend.reserved_usd + pending.of(user_id);
    if spend.settled_usd + reserved + estimate_usd > budget {
        return Ok(Some(format!(
            "user over the {tier} daily budget (${:.4} spent and ${reserved:.4} reserved today of ${budget:.4}; this needs ${estimate_usd:.4})",
            spend.settled_usd
        )));
    }
    pending.add(user_id, estimate_usd);
    Ok(None)
}

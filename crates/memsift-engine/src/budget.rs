//! Daily spend budgets per tier: what a request is expected to cost, whether a user's planned
//! requests still fit, and the key recorded on requests the budget policy sent to the offline
//! lane instead.
//!
//! A request reserves its estimate when it is planned (`llm_requests.reserved_usd`) and is
//! settled at its real `cost_usd` once answered; what a user holds against today's budget is the
//! real cost of today's answered or ended requests plus the reservations of those still planned or
//! in flight. So every request planned in one step is counted before the next is planned, and a
//! step can never spend past the budget (the estimate prices every output token the request is
//! allowed, and it is sent with that allowance as its `max_tokens`, so an answer costs at most
//! its reservation).
//!
//! Pricing every request at the config's `max_tokens` made budgets spend a twentieth of what
//! they allow (an extraction answer is a few hundred tokens, `max_tokens` thousands), so under a
//! budget the allowance is learned from the newest answers of the same purpose and model: a high
//! percentile plus headroom. A rare answer longer than that is cut and its missing part retried,
//! which costs less than reserving every request for the longest answer.

use std::cell::RefCell;
use std::collections::HashMap;

use memsift_core::UserId;
use memsift_core::config::{Config, OverBudget, ProviderKind, price_for};
use memsift_core::status::{Lane, Purpose};
use memsift_llm::ResolvedLlm;
use memsift_llm::usage::{TokenUsage, cost};
use memsift_routing::Route;
use memsift_store::RecentOutput;

use crate::app::{App, OVER_BUDGET_KEY};

/// The most a request on `lane` through `llm` can cost: its counted input tokens, uncached, plus
/// `max_tokens` of output (pass the config capped at the request's allowance), at `[prices]`, with the batch discount on the batch lane. The offline
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

/// How many of the newest answers of a purpose and model an output allowance is learned from.
const ALLOWANCE_SAMPLES: i64 = 200;
/// Answers of a purpose and model needed before a learned allowance replaces `max_tokens`.
pub const ALLOWANCE_MIN_SAMPLES: usize = 20;
/// Headroom over the percentile: outputs drift, and a cut answer costs a retry.
const ALLOWANCE_HEADROOM: f64 = 1.25;

/// The output allowance `outputs` (the newest answers, any order) support: their `percentile`
/// plus a quarter, an answer that stopped at its limit counting double (it wanted more than it
/// was allowed); `None` with fewer than [`ALLOWANCE_MIN_SAMPLES`].
pub fn learned_allowance(outputs: &[RecentOutput], percentile: f64) -> Option<u32> {
    if outputs.len() < ALLOWANCE_MIN_SAMPLES {
        return None;
    }
    let mut tokens: Vec<u64> = outputs
        .iter()
        .map(|output| {
            if output.hit_limit {
                output.output_tokens.saturating_mul(2)
            } else {
                output.output_tokens
            }
        })
        .collect();
    tokens.sort_unstable();
    let rank = ((percentile * tokens.len() as f64).ceil() as usize).clamp(1, tokens.len()) - 1;
    let allowance = (tokens[rank] as f64 * ALLOWANCE_HEADROOM).ceil();
    Some(if allowance >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        allowance as u32
    })
}

/// The output a request of `purpose` for a user on `tier` through `llm` on `lane` is sent with
/// and reserves, when less than `llm.max_tokens`: learned from recent answers
/// ([`learned_allowance`]) under a daily budget; `None` (the config's `max_tokens`) without a
/// budget, on the offline lane, or before enough answers are known.
pub(crate) async fn output_allowance(
    app: &App,
    purpose: Purpose,
    tier: &str,
    llm: &ResolvedLlm,
    lane: Lane,
) -> anyhow::Result<Option<u32>> {
    let budgeted = app.config.billing.daily_budget_usd.contains_key(tier);
    if !budgeted || lane == Lane::Heuristic || llm.provider == ProviderKind::Heuristic {
        return Ok(None);
    }
    let Some(learned) = learned_from_recent_answers(app, purpose, &llm.model).await? else {
        return Ok(None);
    };
    // What is sent, after the floor a thinking budget needs.
    let sent = llm.with_output_cap(Some(learned)).max_tokens;
    Ok((sent < llm.max_tokens).then_some(sent))
}

/// [`learned_allowance`] over the newest answers of `purpose` from `model`.
async fn learned_from_recent_answers(app: &App, purpose: Purpose, model: &str) -> anyhow::Result<Option<u32>> {
    let outputs = app
        .store
        .requests()
        .recent_outputs(purpose, model, ALLOWANCE_SAMPLES)
        .await?;
    Ok(learned_allowance(&outputs, app.config.billing.output_percentile))
}

/// What planned requests are expected to cost, and the output each was priced at.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Expected {
    /// Their expected cost in USD.
    pub usd: f64,
    /// The output tokens a request was priced at: the allowance learned from recent answers of its
    /// purpose and model, or its `max_tokens` before [`ALLOWANCE_MIN_SAMPLES`] are known (the
    /// largest over the requests).
    pub output_tokens_each: u32,
    /// Whether that was learned (`false`: `max_tokens`, nothing to learn from yet).
    pub learned: bool,
}

/// What `requests` are expected to cost: each priced with the output allowance learned from the
/// newest answers of its purpose and model (the one a budget sends them with), whether or not a
/// budget is set, else at `max_tokens`. An estimate shown before spending should say what the
/// spend will be, not the most it could be.
pub(crate) async fn expected_usd(app: &App, requests: &[memsift_store::NewRequest]) -> anyhow::Result<Expected> {
    let mut learned: HashMap<(Purpose, String), Option<u32>> = HashMap::new();
    let mut expected = Expected {
        learned: true,
        ..Expected::default()
    };
    for request in requests {
        let Some(llm) = app.router.resolved(&request.config_key) else {
            continue; // The over-budget key: the offline lane, free.
        };
        if request.lane == Lane::Heuristic || llm.provider == ProviderKind::Heuristic {
            continue;
        }
        let key = (request.purpose, llm.model.clone());
        let allowance = match learned.get(&key) {
            Some(allowance) => *allowance,
            None => {
                let allowance = learned_from_recent_answers(app, request.purpose, &llm.model).await?;
                learned.insert(key, allowance);
                allowance
            }
        };
        let priced = llm.with_output_cap(allowance);
        expected.output_tokens_each = expected.output_tokens_each.max(priced.max_tokens);
        expected.learned &= allowance.is_some();
        let input_tokens = memsift_payload::count_tokens(&request.request_body.system)
            + memsift_payload::count_tokens(&request.request_body.user_message);
        expected.usd += estimate_usd(&app.config, &priced, request.lane, input_tokens as u64);
    }
    Ok(expected)
}

/// What one planning pass knows that the store cannot tell it yet: the estimates it granted, by
/// user (its requests are written together at its end), and the output allowances it learned,
/// by purpose, tier, lane and model (read once per pass, not once per request).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    granted: RefCell<HashMap<UserId, f64>>,
    allowances: RefCell<HashMap<(Purpose, String), Option<u32>>>,
}

impl Pending {
    fn of(&self, user_id: UserId) -> f64 {
        self.granted.borrow().get(&user_id).copied().unwrap_or(0.0)
    }

    fn add(&self, user_id: UserId, usd: f64) {
        *self.granted.borrow_mut().entry(user_id).or_default() += usd;
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

/// What the budget made of requests about to be planned.
pub(crate) enum Reserved {
    /// They go `route`'s way, each with its reservation (none on the offline lane) and the output
    /// allowance it is sent with.
    Granted {
        route: Route,
        reservations: Vec<f64>,
        allowance: Option<u32>,
    },
    /// Over budget under `over_budget = "defer"`: why, for the caller to record.
    Deferred(String),
}

/// Prices requests of `purpose` for `user_id` on `route`, one per entry of `input_tokens` (a
/// segment's chunks reserve together, all or none), and reserves them against the daily budget
/// of `tier` beside `pending`; when they do not fit, follows `[billing] over_budget`: the offline
/// lane with nothing reserved, or [`Reserved::Deferred`].
pub(crate) async fn reserve(
    app: &App,
    purpose: Purpose,
    user_id: UserId,
    tier: &str,
    route: Route,
    input_tokens: &[u64],
    pending: &Pending,
) -> anyhow::Result<Reserved> {
    // Tier and lane decide whether there is an allowance at all; the model, what it is.
    let learned = (purpose, format!("{tier}/{}/{}", route.lane, route.llm.model));
    let known = pending.allowances.borrow().get(&learned).copied();
    let allowance = match known {
        Some(allowance) => allowance,
        None => {
            let allowance = output_allowance(app, purpose, tier, &route.llm, route.lane).await?;
            pending.allowances.borrow_mut().insert(learned, allowance);
            allowance
        }
    };
    let allowed = route.llm.with_output_cap(allowance);
    let reservations: Vec<f64> = input_tokens
        .iter()
        .map(|&tokens| estimate_usd(&app.config, &allowed, route.lane, tokens))
        .collect();
    let needed = reservations.iter().sum();
    let Some(over) = within_budget(app, user_id, tier, route.lane, needed, pending).await? else {
        return Ok(Reserved::Granted {
            route,
            reservations,
            allowance,
        });
    };
    match app.config.billing.over_budget {
        OverBudget::Heuristic => {
            tracing::info!(%user_id, %tier, %purpose, "{over}; going on the heuristic lane.");
            Ok(Reserved::Granted {
                route: Route {
                    lane: Lane::Heuristic,
                    config_key: OVER_BUDGET_KEY.to_owned(),
                    llm: ResolvedLlm::offline(OVER_BUDGET_KEY),
                },
                reservations: vec![0.0; input_tokens.len()],
                allowance: None,
            })
        }
        OverBudget::Defer => {
            tracing::info!(%user_id, %tier, %purpose, "{over}; waiting until the budget allows.");
            Ok(Reserved::Deferred(over))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn outputs() -> impl Strategy<Value = Vec<RecentOutput>> {
        proptest::collection::vec(
            (0u64..200_000, proptest::bool::weighted(0.1)).prop_map(|(output_tokens, hit_limit)| RecentOutput {
                output_tokens,
                hit_limit,
            }),
            0..300,
        )
    }

    proptest! {
        /// The allowance covers at least `percentile` of the recent answers (an answer cut at its
        /// limit as twice what it got), and is no larger than the largest of them plus headroom.
        #[test]
        fn the_allowance_covers_the_percentile_and_no_more_than_the_largest_answer(
            outputs in outputs(),
            percentile in 0.5f64..=1.0,
        ) {
            let allowance = learned_allowance(&outputs, percentile);
            if outputs.len() < ALLOWANCE_MIN_SAMPLES {
                prop_assert_eq!(allowance, None);
                return Ok(());
            }
            let allowance = u64::from(allowance.expect("enough answers"));
            let wanted: Vec<u64> = outputs
                .iter()
                .map(|output| output.output_tokens * if output.hit_limit { 2 } else { 1 })
                .collect();
            let covered = wanted.iter().filter(|&&tokens| tokens <= allowance).count();
            prop_assert!(covered as f64 >= percentile * wanted.len() as f64 - 1e-9);
            let largest = wanted.iter().copied().max().unwrap_or(0);
            prop_assert!(allowance as f64 <= (largest as f64 * ALLOWANCE_HEADROOM).ceil());
        }
    }

    #[test]
    fn an_answer_cut_at_its_limit_raises_the_next_allowance() {
        let answered = |hit_limit| {
            vec![
                RecentOutput {
                    output_tokens: 400,
                    hit_limit,
                };
                ALLOWANCE_MIN_SAMPLES
            ]
        };
        assert_eq!(learned_allowance(&answered(false), 0.99), Some(500));
        assert_eq!(learned_allowance(&answered(true), 0.99), Some(1000));
    }
}

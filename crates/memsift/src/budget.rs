//! Daily spend budgets per tier: whether a user's planned request would go over, and the key
//! recorded on requests the budget policy sent to the offline lane instead.

use memsift_core::UserId;
use memsift_core::status::Lane;

use crate::app::App;

/// The config key recorded on requests that the budget policy sent to the heuristic lane.
pub const OVER_BUDGET_KEY: &str = "over_budget_heuristic";

/// `Some(why)` when the user has spent their tier's daily budget and the route would spend more;
/// the offline lane costs nothing, so it is never over.
pub(crate) async fn over_budget(app: &App, user_id: UserId, tier: &str, lane: Lane) -> anyhow::Result<Option<String>> {
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
    let spent = app.store.user_cost_since(user_id, day_start).await?;
    Ok((spent >= budget)
        .then(|| format!("user over the {tier} daily budget (${spent:.4} of ${budget:.4} spent today)")))
}

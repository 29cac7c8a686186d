//! Provider lane health on the pipeline: moving waiting work off unwell lanes, recording breaker
//! changes where every process can read them, and stopping `run --until-idle` on a paused lane.
//!
//! The breakers themselves live in `memsift_llm::health` and are fed by every call (the immediate
//! lane here in `pipeline`, creates, polls and downloads in the batch coordinator).

use std::collections::HashMap;

use memsift_core::UserId;
use memsift_core::status::Lane;
use memsift_llm::{LaneKey, OpenCause, Transition};
use memsift_store::{LaneHealthRow, LaneTransition, Reroute};

use crate::app::App;

/// Waiting requests looked at per unwell lane and step.
const REROUTE_PAGE: i64 = 500;

/// Moves planned requests off lanes that are not usable now to the lane their route chooses
/// instead: the next provider of the route (`fallback`), or, for `lane = "auto"`, the same
/// provider's immediate lane. Requests with nowhere else to go stay. Returns how many moved.
pub async fn reroute_waiting(app: &App) -> anyhow::Result<u64> {
    let now = app.clock.now();
    let mut tiers: HashMap<UserId, String> = HashMap::new();
    let mut moved = 0;
    for (lane_key, _) in app.health.unhealthy(now) {
        if app.health.usable(&lane_key, now) {
            continue;
        }
        let sections = app.router.sections_on(&lane_key);
        for waiting in app
            .store
            .lanes()
            .waiting_requests(lane_key.lane, &sections, REROUTE_PAGE)
            .await?
        {
            let tier = match tiers.get(&waiting.user_id) {
                Some(tier) => tier.clone(),
                None => {
                    let tier = app
                        .billing
                        .tier_of(app.store.users().user_billing_tier(waiting.user_id).await?.as_deref());
                    tiers.insert(waiting.user_id, tier.clone());
                    tier
                }
            };
            // A tier that no longer resolves leaves the request where it is, for an admin.
            let Ok(route) = app.router.route(waiting.purpose, &tier, false, now) else {
                continue;
            };
            let same = route.lane == lane_key.lane && route.config_key == waiting.config_key;
            let target_usable =
                route.lane == Lane::Heuristic || app.health.usable(&LaneKey::of(route.lane, &route.llm), now);
            if same || !target_usable {
                continue;
            }
            let to = Reroute {
                lane: route.lane,
                config_key: &route.config_key,
                provider: route.llm.provider.as_str(),
                model: Some(route.llm.model.as_str()).filter(|model| !model.is_empty()),
            };
            if app.store.lanes().reroute_request(waiting.id, &to).await? {
                moved += 1;
            }
        }
        tracing::debug!(lane = %lane_key.name(), moved, "Moved waiting work off an unwell lane.");
    }
    Ok(moved)
}

/// Records every breaker change since the last call in the store (for `memsift batches`, the
/// admin pages and `/metrics`) and logs it: one error line with the likely fix when a setting
/// fault pauses a lane, one line when a lane resumes.
pub async fn persist_transitions(app: &App) -> anyhow::Result<()> {
    for transition in app.health.take_transitions() {
        log_transition(&transition);
        let Transition {
            key,
            at,
            to,
            cause,
            next_probe_at,
            ..
        } = &transition;
        app.store
            .lanes()
            .record_lane_transition(
                &LaneTransition {
                    lane: key.lane,
                    provider: &key.provider,
                    model: &key.model,
                    endpoint: &key.endpoint,
                    state: to,
                    setting_fault: cause.as_ref().is_some_and(|cause| cause.setting_fault),
                    reason: cause.as_ref().map(|cause| cause.reason.as_str()),
                    fix: cause.as_ref().and_then(|cause| cause.fix.as_deref()),
                    opened_at: cause.as_ref().map(|cause| cause.opened_at),
                    next_probe_at: *next_probe_at,
                    at: *at,
                },
                &app.worker_id,
            )
            .await?;
    }
    Ok(())
}

fn log_transition(transition: &Transition) {
    let lane = transition.key.name();
    match (transition.from, transition.to, &transition.cause) {
        ("closed", "open", Some(cause)) if cause.setting_fault => tracing::error!(
            %lane,
            error = %cause.reason,
            fix = cause.fix.as_deref().unwrap_or("check the section's settings"),
            "Lane paused by a setting fault: no attempt is spent and its work waits; probing again with backoff."
        ),
        ("closed", "open", Some(cause)) => tracing::warn!(
            %lane,
            error = %cause.reason,
            "Lane unwell: new work goes to the route's next provider while it cools down."
        ),
        (_, "closed", _) => tracing::info!(%lane, "Lane healthy again; its work resumes."),
        (_, "open", Some(cause)) => tracing::info!(
            %lane,
            error = %cause.reason,
            next_probe_at = ?transition.next_probe_at,
            "Probe failed; the lane waits longer."
        ),
        _ => tracing::debug!(%lane, from = transition.from, to = transition.to, "Lane breaker changed."),
    }
}

/// The lanes that cannot take their waiting work now, as `run --until-idle` sees them.
#[derive(Debug, Default)]
pub struct PausedLanes {
    /// The lanes and config keys whose planned requests wait on those lanes rather than for a time.
    pub held: Vec<(Lane, String)>,
    /// The earliest first probe of a lane open after an outage: work that may still finish.
    pub next_probe_at: Option<chrono::DateTime<chrono::Utc>>,
    /// One line per lane nothing will move by itself during this run: a setting fault, or an
    /// outage whose probe already failed.
    stuck: Vec<String>,
    setting_fault: bool,
}

impl PausedLanes {
    /// Fails with the stuck lanes' lines, naming each lane, the provider's answer and the likely
    /// fix; nothing was spent on their work. `Ok` when none is stuck.
    pub fn stop_if_stuck(&self) -> anyhow::Result<()> {
        if self.stuck.is_empty() {
            return Ok(());
        }
        let fix = if self.setting_fault {
            "fix the setting and run again (the daemon probes by itself)"
        } else {
            "run again once the provider answers, or add a fallback to the route (the daemon probes by itself)"
        };
        anyhow::bail!("{}; no attempt was spent: {fix}", self.stuck.join("; "))
    }
}

/// Every lane that is not usable (a setting fault, or an outage whose route has no other way)
/// and still has work waiting. A lane open after an outage whose first probe is still to come is
/// work that may finish, so the run waits for that probe; a failed probe, or a setting fault,
/// leaves the lane stuck until an operator or the daemon's later probes move it.
pub async fn paused_lanes(app: &App) -> anyhow::Result<PausedLanes> {
    let now = app.clock.now();
    let first_cool_down = app.health.policy().cool_down;
    let mut paused = PausedLanes::default();
    for (lane_key, state) in app.health.unhealthy(now) {
        // A lane open after an outage pauses too once the route has no other way for its work:
        // what is still waiting on it was left there by `reroute_waiting`.
        let Some(cause) = state.cause() else {
            continue;
        };
        let sections = app.router.sections_on(&lane_key);
        let waiting = app.store.lanes().waiting_requests(lane_key.lane, &sections, 1).await?;
        if waiting.is_empty() {
            continue;
        }
        paused
            .held
            .extend(sections.into_iter().map(|section| (lane_key.lane, section)));
        let first_probe = match &state {
            memsift_llm::BreakerState::Open { until, .. }
                if !cause.setting_fault && cause.cool_down <= first_cool_down =>
            {
                Some(*until)
            }
            _ => None,
        };
        match first_probe {
            Some(at) => paused.next_probe_at = Some(paused.next_probe_at.map_or(at, |next| next.min(at))),
            None => {
                paused.setting_fault |= cause.setting_fault;
                paused.stuck.push(paused_line(&lane_key, cause));
            }
        }
    }
    Ok(paused)
}

fn paused_line(lane_key: &LaneKey, cause: &OpenCause) -> String {
    let why = if cause.setting_fault {
        "is paused by a setting fault"
    } else {
        "is paused by an outage and its route has no other way"
    };
    format!("lane {} {why}: {}", lane_key.name(), cause.describe())
}

/// The lines `memsift batches` and `memsift segments` print under their tables: every lane that
/// is not closed, as the process that last changed it saw it.
pub fn describe_unhealthy(rows: &[LaneHealthRow]) -> Vec<String> {
    rows.iter()
        .filter(|row| row.state != "closed")
        .map(|row| {
            let kind = if row.setting_fault {
                "paused by a setting fault"
            } else {
                "unwell"
            };
            let since = row
                .opened_at
                .map(|at| format!(" since {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
                .unwrap_or_default();
            let probe = row
                .next_probe_at
                .map(|at| format!("; next probe {}", at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)))
                .unwrap_or_default();
            let fix = row
                .fix
                .as_deref()
                .map(|fix| format!("; likely fix: {fix}"))
                .unwrap_or_default();
            format!(
                "lane {} {}/{} at {} is {kind} ({}){since}: {}{fix}{probe}",
                row.lane,
                row.provider,
                row.model,
                row.endpoint,
                row.state,
                row.reason.as_deref().unwrap_or("no detail"),
            )
        })
        .collect()
}

//! Lane choice: the routing table, the circuit breaker with injected time, and start-up checks.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use memsift_core::config::{Config, LanePolicy, LlmConfig, ProviderKind};
use memsift_core::status::{Lane, Purpose};
use memsift_routing::{BreakerPolicy, BreakerState, ColumnBilling, HealthSignal, Router, RoutingError};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 14, 9, 0, 0).unwrap()
}

fn llm(provider: ProviderKind, lane: LanePolicy) -> LlmConfig {
    LlmConfig {
        provider,
        endpoint: None,
        model: (provider != ProviderKind::Heuristic).then(|| "claude-haiku-4-5".to_owned()),
        api_key_env: None,
        api_key_file: None,
        lane,
        temperature: None,
        max_tokens: 1024,
        thinking_budget_tokens: None,
        cache_ttl: "1h".to_owned(),
    }
}

/// A config whose tiers are the given names, each answered by its own extraction config.
fn config(tiers: &[(&str, LlmConfig)]) -> Config {
    let mut config = Config::defaults();
    config.billing.tiers = tiers.iter().map(|(tier, _)| (*tier).to_owned()).collect();
    config.billing.default_tier = tiers[0].0.to_owned();
    config.llm.clear();
    // Only extraction is configured here; the stages' keys are not under test.
    config.postprocess.enabled = false;
    for (tier, llm) in tiers {
        config.llm.insert(format!("extraction_{tier}"), llm.clone());
    }
    config
}

fn router(config: &Config) -> Router {
    Router::new(
        config,
        Arc::new(ColumnBilling {
            default_tier: config.billing.default_tier.clone(),
        }),
    )
    .unwrap()
}

fn lane(router: &Router, tier: &str, urgent: bool, now: DateTime<Utc>) -> Lane {
    router.route(Purpose::Extraction, tier, urgent, now).unwrap().lane
}

#[test]
fn the_routing_table() {
    use LanePolicy::{Auto, Batch, Immediate};
    use ProviderKind::{Anthropic, Heuristic, Openai, OpenaiCompatible};
    // (provider, policy, urgent, expected lane)
    let cases = [
        (Heuristic, Auto, false, Lane::Heuristic),
        (Heuristic, Batch, false, Lane::Heuristic),
        (Heuristic, Immediate, true, Lane::Heuristic),
        (Anthropic, Auto, false, Lane::Batch),
        (Anthropic, Auto, true, Lane::Immediate),
        (Anthropic, Batch, false, Lane::Batch),
        (Anthropic, Batch, true, Lane::Batch),
        (Anthropic, Immediate, false, Lane::Immediate),
        (Openai, Auto, false, Lane::Batch),
        (Openai, Auto, true, Lane::Immediate),
        (Openai, Batch, false, Lane::Batch),
        (Openai, Immediate, false, Lane::Immediate),
        (OpenaiCompatible, Auto, false, Lane::Immediate),
        (OpenaiCompatible, Auto, true, Lane::Immediate),
        (OpenaiCompatible, Immediate, false, Lane::Immediate),
    ];
    for (provider, policy, urgent, expected) in cases {
        let config = config(&[("t", llm(provider, policy))]);
        let route = router(&config).route(Purpose::Extraction, "t", urgent, t0()).unwrap();
        assert_eq!(
            route.lane, expected,
            "{provider:?} with lane {policy:?}, urgent {urgent}"
        );
        assert_eq!(route.config_key, "extraction_t");
        assert_eq!(route.llm.provider, provider);
    }
}

#[test]
fn an_open_breaker_sends_auto_work_to_immediate_until_one_probe_succeeds() {
    let config = config(&[
        ("auto", llm(ProviderKind::Anthropic, LanePolicy::Auto)),
        ("forced", llm(ProviderKind::Anthropic, LanePolicy::Batch)),
        ("other", llm(ProviderKind::Openai, LanePolicy::Auto)),
    ]);
    let router = router(&config);
    let now = t0();
    for _ in 0..4 {
        router.record_outcome(ProviderKind::Anthropic, HealthSignal::ServerError, now);
    }
    // 429s and bad requests say nothing about health and neither count nor reset.
    router.record_outcome(ProviderKind::Anthropic, HealthSignal::Other, now);
    assert_eq!(
        lane(&router, "auto", false, now),
        Lane::Batch,
        "four failures leave it closed"
    );
    router.record_outcome(ProviderKind::Anthropic, HealthSignal::Overloaded, now);
    assert_eq!(
        router.breaker_state(ProviderKind::Anthropic, now),
        BreakerState::Open {
            until: now + Duration::seconds(60)
        }
    );
    assert_eq!(
        lane(&router, "auto", false, now),
        Lane::Immediate,
        "open: auto goes immediate"
    );
    assert_eq!(
        lane(&router, "forced", false, now),
        Lane::Batch,
        "an explicit batch policy is obeyed"
    );
    assert_eq!(
        lane(&router, "other", false, now),
        Lane::Batch,
        "breakers are per provider"
    );

    let later = now + Duration::seconds(59);
    assert_eq!(
        lane(&router, "auto", false, later),
        Lane::Immediate,
        "still cooling down"
    );

    let half_open = now + Duration::seconds(60);
    assert_eq!(
        lane(&router, "auto", true, half_open),
        Lane::Immediate,
        "urgent work spends no probe"
    );
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch, "the one probe");
    assert_eq!(
        lane(&router, "auto", false, half_open),
        Lane::Immediate,
        "only one probe"
    );
    router.record_outcome(ProviderKind::Anthropic, HealthSignal::Success, half_open);
    assert_eq!(
        router.breaker_state(ProviderKind::Anthropic, half_open),
        BreakerState::Closed {
            consecutive_failures: 0
        }
    );
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch);
    assert_eq!(lane(&router, "auto", false, half_open), Lane::Batch);
}

#[test]
fn a_failed_probe_reopens_and_a_lost_probe_is_replaced_after_a_cool_down() {
    let config = config(&[("auto", llm(ProviderKind::Openai, LanePolicy::Auto))]);
    let router = router(&config).with_breaker_policy(BreakerPolicy {
        failure_threshold: 2,
        cool_down: Duration::seconds(30),
    });
    let now = t0();
    router.record_outcome(ProviderKind::Openai, HealthSignal::ConnectionError, now);
    router.record_outcome(ProviderKind::Openai, HealthSignal::ConnectionError, now);
    assert_eq!(lane(&router, "auto", false, now), Lane::Immediate);

    let probe = now + Duration::seconds(30);
    assert_eq!(lane(&router, "auto", false, probe), Lane::Batch);
    router.record_outcome(ProviderKind::Openai, HealthSignal::ServerError, probe);
    assert_eq!(
        router.breaker_state(ProviderKind::Openai, probe),
        BreakerState::Open {
            until: probe + Duration::seconds(30)
        }
    );
    assert_eq!(
        lane(&router, "auto", false, probe + Duration::seconds(29)),
        Lane::Immediate
    );

    let second_probe = probe + Duration::seconds(30);
    assert_eq!(lane(&router, "auto", false, second_probe), Lane::Batch);
    // Its outcome never comes back (the batch was lost): after a cool-down another probe may go.
    assert_eq!(
        lane(&router, "auto", false, second_probe + Duration::seconds(29)),
        Lane::Immediate
    );
    assert_eq!(
        lane(&router, "auto", false, second_probe + Duration::seconds(30)),
        Lane::Batch
    );
}

#[test]
fn an_unresolvable_tier_key_stops_the_router_with_one_line() {
    let mut config = config(&[("standard", llm(ProviderKind::Heuristic, LanePolicy::Auto))]);
    config.billing.tiers.push("premium".to_owned());
    let error = Router::new(
        &config,
        Arc::new(ColumnBilling {
            default_tier: "standard".into(),
        }),
    )
    .unwrap_err();
    assert!(matches!(error, RoutingError::Config(_)));
    assert_eq!(
        error.to_string(),
        "config: no [llm.extraction_premium] section, but tier `premium` reaches purpose `extraction`; add [llm.extraction_premium] or remove `premium` from billing.tiers"
    );
}

#[test]
fn an_invalid_llm_section_stops_the_router_with_one_line() {
    let mut broken = llm(ProviderKind::Anthropic, LanePolicy::Auto);
    broken.model = None;
    broken.max_tokens = 0;
    let config = config(&[("standard", broken)]);
    let error = Router::new(
        &config,
        Arc::new(ColumnBilling {
            default_tier: "standard".into(),
        }),
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(!text.contains('\n'));
    assert_eq!(
        text,
        "llm.extraction_standard.model is unset; name the model, e.g. model = \"claude-haiku-4-5\"; llm.extraction_standard.max_tokens = 0 is invalid; use at least 1 (default 8192)"
    );
}

#[test]
fn an_unknown_tier_at_run_time_is_a_clear_error_and_billing_decides_the_tier() {
    let config = config(&[("standard", llm(ProviderKind::Heuristic, LanePolicy::Auto))]);
    let router = router(&config);
    let error = router.route(Purpose::Extraction, "gold", false, t0()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "billing tier `gold` is not in billing.tiers [\"standard\"]; add it (with its [llm.*] sections) or fix the user's billing_tier"
    );
    assert_eq!(router.tier_of(None), "standard");
    assert_eq!(router.tier_of(Some("gold")), "gold");
}
